#!/usr/bin/env python3
"""Writes deploy/grafana/grove.json, the Grafana dashboard of groved (metrics: docs/metrics.md).

The dashboard is generated so that every panel follows the same conventions (datasource variable,
job/instance/model filters, units); edit this script and rerun it:
    python3 deploy/grafana/make_dashboard.py [--check]
tests/deploy evaluates every query of the generated file against a real Prometheus scraping a real
groved, and fails when grove.json is out of date or queries a metric groved does not export.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, "grove.json")

DS = {"type": "prometheus", "uid": "${datasource}"}
# Filters of every per-pod query. Recording-rule series (the fleet row) have no instance label.
SRV = 'job=~"$job", instance=~"$instance"'
SEL = SRV + ', model=~"$model"'
FLEET = 'job=~"$job", model=~"$model"'
RATE = "$__rate_interval"


class Layout:
    """Places panels left to right, 24 columns wide, rows of the given height."""

    def __init__(self):
        self.x = 0
        self.y = 0
        self.h = 0
        self.next_id = 1

    def place(self, w, h):
        if self.x + w > 24:
            self.x, self.y = 0, self.y + self.h
            self.h = 0
        pos = {"x": self.x, "y": self.y, "w": w, "h": h}
        self.x += w
        self.h = max(self.h, h)
        return pos

    def row(self, title):
        if self.x:
            self.x, self.y, self.h = 0, self.y + self.h, 0
        panel = {"type": "row", "title": title, "collapsed": False, "panels": [],
                 "id": self.take_id(), "gridPos": {"x": 0, "y": self.y, "w": 24, "h": 1}}
        self.y += 1
        return panel

    def take_id(self):
        i = self.next_id
        self.next_id += 1
        return i


L = Layout()


def target(expr, legend="", ref="A", fmt=None, instant=False):
    t = {"datasource": DS, "refId": ref, "expr": expr, "legendFormat": legend or "__auto",
         "range": not instant, "instant": instant}
    if fmt:
        t["format"] = fmt
    return t


def timeseries(title, targets, unit="short", w=8, h=8, stack=False, description="", min0=True):
    refs = "ABCDEFGH"
    panel = {
        "type": "timeseries", "title": title, "description": description, "datasource": DS,
        "id": L.take_id(), "gridPos": L.place(w, h),
        "targets": [dict(t, refId=refs[i]) for i, t in enumerate(targets)],
        "fieldConfig": {
            "defaults": {
                "unit": unit,
                "custom": {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 20 if stack else 0,
                           "showPoints": "never", "spanNulls": True,
                           "stacking": {"mode": "normal" if stack else "none", "group": "A"}},
            },
            "overrides": [],
        },
        "options": {"legend": {"displayMode": "table", "placement": "bottom",
                               "calcs": ["mean", "max", "lastNotNull"], "showLegend": True},
                    "tooltip": {"mode": "multi", "sort": "desc"}},
    }
    if min0:
        panel["fieldConfig"]["defaults"]["min"] = 0
    return panel


def stat(title, expr, unit="short", w=4, h=4, description=""):
    return {
        "type": "stat", "title": title, "description": description, "datasource": DS,
        "id": L.take_id(), "gridPos": L.place(w, h),
        "targets": [target(expr)],
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "colorMode": "value", "graphMode": "area", "textMode": "auto"},
    }


def heatmap(title, expr, w=12, h=8, description="", unit="short"):
    return {
        "type": "heatmap", "title": title, "description": description, "datasource": DS,
        "id": L.take_id(), "gridPos": L.place(w, h),
        "targets": [target(expr, legend="{{le}}", fmt="heatmap")],
        "options": {"calculate": False, "yAxis": {"unit": unit},
                    "cellGap": 1, "color": {"mode": "scheme", "scheme": "Oranges", "steps": 64},
                    "tooltip": {"show": True, "yHistogram": False}},
    }


def table(title, expr, w=12, h=8, description=""):
    return {
        "type": "table", "title": title, "description": description, "datasource": DS,
        "id": L.take_id(), "gridPos": L.place(w, h),
        "targets": [target(expr, fmt="table", instant=True)],
        "transformations": [{"id": "organize", "options": {
            "excludeByName": {"Time": True, "__name__": True, "job": True},
            "renameByName": {"Value": "ready"}}}],
    }


def quantiles(metric, by, sel, legend):
    """p50 and p99 targets of a `_seconds` histogram, per `by` labels."""
    return [target(f"histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{{{sel}}}[{RATE}])))",
                   legend=f"p{int(round(float(q) * 100))} {legend}")
            for q in ("0.5", "0.99")]


def panels():
    p = []
    p.append(L.row("Overview"))
    p.append(stat("Rows / s", f"sum(rate(grove_rows_total{{{SEL}}}[{RATE}]))", unit="rowsps",
                  description="Rows computed per second, every operation (grove_rows_total)."))
    p.append(stat("Requests / s", f"sum(rate(grove_requests_total{{{SEL}}}[{RATE}]))", unit="reqps"))
    p.append(stat("Error ratio",
                  f'(sum(rate(grove_requests_total{{{SEL}, code!="OK"}}[{RATE}])) or vector(0))'
                  f" / sum(rate(grove_requests_total{{{SEL}}}[{RATE}]))", unit="percentunit",
                  description="Share of finished RPCs with a code other than OK."))
    p.append(stat("Servers ready", f"sum(grove_server_ready{{{SRV}}})",
                  description="groved processes reporting ready (health service \"\" SERVING)."))
    p.append(stat("Models ready", f"count(max by (model) (grove_model_ready{{{SEL}}}) == 1) or vector(0)",
                  description="Models with a ready version on at least one selected instance."))
    p.append(stat("Requests in flight", f"sum(grove_inflight_requests{{{SRV}}})"))

    p.append(L.row("Traffic"))
    p.append(timeseries("Throughput (rows / s)",
                        [target(f"sum by (model, operation) (rate(grove_rows_total{{{SEL}}}[{RATE}]))",
                                "{{model}} {{operation}}")],
                        unit="rowsps", stack=True,
                        description="Rows computed successfully per second (grove_rows_total)."))
    p.append(timeseries("Requests / s by method and code",
                        [target(f"sum by (method, code) (rate(grove_requests_total{{{SEL}}}[{RATE}]))",
                                "{{method}} {{code}}")], unit="reqps", stack=True))
    p.append(timeseries("Error ratio by model and method",
                        [target(f'(sum by (model, method) (rate(grove_requests_total{{{SEL}, code!="OK"}}[{RATE}]))'
                                f" or 0 * sum by (model, method) (rate(grove_requests_total{{{SEL}}}[{RATE}])))"
                                f" / sum by (model, method) (rate(grove_requests_total{{{SEL}}}[{RATE}]))",
                                "{{model}} {{method}}")], unit="percentunit",
                        description="Non-OK share of finished RPCs; the codes themselves are in the panel on the left."))

    p.append(L.row("Latency"))
    p.append(timeseries("End-to-end latency p50 / p99 by operation",
                        quantiles("grove_request_duration_seconds", "operation", SEL, "{{operation}}"),
                        unit="s", w=12,
                        description="grove_request_duration_seconds: arrival to response, successful calls."))
    p.append(timeseries("End-to-end latency p50 / p99 by method",
                        quantiles("grove_request_duration_seconds", "method", SEL, "{{method}}"), unit="s", w=12))
    p.append(timeseries("Queue wait p50 / p99",
                        quantiles("grove_queue_wait_seconds", "operation", SEL, "{{operation}}"), unit="s", w=12,
                        description="Time from entering the batcher to the batch starting compute."))
    p.append(timeseries("Compute time per batch p50 / p99",
                        quantiles("grove_compute_duration_seconds", "operation", SEL, "{{operation}}"), unit="s", w=12,
                        description="Engine time of one batch, host-device copies included."))

    p.append(L.row("Batching"))
    p.append(heatmap("Batch size distribution (rows)",
                     f"sum by (le) (increase(grove_batch_size_rows_bucket{{{SEL}}}[{RATE}]))",
                     description="Rows per executed batch (grove_batch_size_rows)."))
    p.append(timeseries("Mean batch size and tasks per batch",
                        [target(f"sum by (operation) (rate(grove_batch_size_rows_sum{{{SEL}}}[{RATE}]))"
                                f" / sum by (operation) (rate(grove_batch_size_rows_count{{{SEL}}}[{RATE}]))",
                                "rows {{operation}}"),
                         target(f"sum by (operation) (rate(grove_batch_tasks_sum{{{SEL}}}[{RATE}]))"
                                f" / sum by (operation) (rate(grove_batch_tasks_count{{{SEL}}}[{RATE}]))",
                                "tasks {{operation}}")], w=12))
    p.append(timeseries("Strategy and device mix (batches / s)",
                        [target(f"sum by (operation, device, strategy) (rate(grove_batches_total{{{SEL}}}[{RATE}]))",
                                "{{operation}} {{device}} {{strategy}}")], stack=True, w=8,
                        description="Executed batches by the device and strategy the engine chose."))
    p.append(timeseries("Queue depth and rows in flight",
                        [target(f"sum by (model, operation) (grove_queue_depth_rows{{{SEL}}})",
                                "queued {{model}} {{operation}}"),
                         target(f"sum by (model, operation) (grove_inflight_rows{{{SEL}}})",
                                "in flight {{model}} {{operation}}")], w=8,
                        description="grove_inflight_rows is the autoscaling signal (deploy/k8s/components/autoscaling)."))
    p.append(timeseries("Dropped tasks / s by reason",
                        [target(f"sum by (model, operation, reason) (rate(grove_dropped_tasks_total{{{SEL}}}[{RATE}]))",
                                "{{model}} {{operation}} {{reason}}")], w=8,
                        description="Answered without compute: queue_full (RESOURCE_EXHAUSTED), deadline_exceeded, "
                                    "cancelled, shutdown."))

    p.append(L.row("Models"))
    p.append(table("Models loaded",
                   f"max by (instance, model, version) (grove_model_ready{{{SEL}}})",
                   description="grove_model_ready per instance and version: 1 serving, 0 loading/failed/unloaded."))
    p.append(timeseries("Resident bytes by model and device",
                        [target(f"sum by (model, version, device) (grove_model_bytes{{{SEL}}})",
                                "{{model}} v{{version}} {{device}}")], unit="bytes", stack=True, w=12,
                        description="host: the parsed forest; gpu: engine layouts on all GPUs (summed over instances)."))
    p.append(timeseries("Model load time (last successful load)",
                        [target(f"max by (model, version) (grove_model_load_duration_seconds{{{SEL}}})",
                                "{{model}} v{{version}}")], unit="s", w=12))
    p.append(timeseries("Model loads / s by result",
                        [target(f"sum by (model, result) (rate(grove_model_loads_total{{{SEL}}}[{RATE}]))",
                                "{{model}} {{result}}")], w=12))

    p.append(L.row("GPU"))
    p.append(timeseries("GPU memory used / total",
                        [target(f"sum by (instance, device) (grove_gpu_memory_used_bytes{{{SRV}}})",
                                "used {{instance}} {{device}}"),
                         target(f"sum by (instance, device) (grove_gpu_memory_total_bytes{{{SRV}}})",
                                "total {{instance}} {{device}}")], unit="bytes", w=12,
                        description="cudaMemGetInfo at every scrape. No data from CPU-only builds."))
    p.append(timeseries("GPU memory held by models",
                        [target(f'sum by (instance, model) (grove_model_bytes{{{SEL}, device="gpu"}})',
                                "{{instance}} {{model}}")], unit="bytes", stack=True, w=12,
                        description="Engine layouts resident on GPUs (grove_model_bytes{device=\"gpu\"})."))
    p.append(timeseries("Host buffer pool (--host_buffer_mb)",
                        [target(f"sum by (instance, state) (grove_host_buffer_bytes{{{SRV}}})",
                                "{{state}} {{instance}}")], unit="bytes", w=12,
                        description="Kept buffers for large requests' rows and merged batches, and those "
                                    "in use now; page-locked when grove_host_buffer_page_locked is 1."))
    p.append(timeseries("Host buffer misses / s",
                        [target(f"sum by (instance) (rate(grove_host_buffer_misses_total{{{SRV}}}[{RATE}]))",
                                "{{instance}}")], w=12,
                        description="Requests or batches the pool had no buffer for (the slower path). "
                                    "Steady misses with kept bytes at the bound: raise --host_buffer_mb."))

    p.append(L.row("Fleet (recording rules of deploy/prometheus/grove-rules.yaml)"))
    p.append(timeseries("Fleet throughput (rows / s)",
                        [target(f"sum by (model, operation) (model_operation:grove_rows:rate1m{{{FLEET}}})",
                                "{{model}} {{operation}}")], unit="rowsps", stack=True))
    p.append(timeseries("Fleet p99 latency by method",
                        [target(f'max by (model, method, operation) '
                                f'(model_method_operation:grove_request_duration_seconds:quantile_rate5m'
                                f'{{{FLEET}, quantile="0.99"}})',
                                "{{model}} {{method}} {{operation}}")], unit="s"))
    p.append(timeseries("Fleet server error ratio",
                        [target(f"max by (model, method) (model_method:grove_request_errors:ratio_rate5m{{{FLEET}}})",
                                "{{model}} {{method}}")], unit="percentunit"))
    return p


def variable(name, label, query, multi=True, include_all=True):
    return {
        "name": name, "label": label, "type": "query", "datasource": DS,
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "definition": query, "refresh": 2, "sort": 1, "multi": multi, "includeAll": include_all,
        "allValue": ".*", "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "options": [], "hide": 0, "regex": "",
    }


def dashboard():
    return {
        "title": "Grove",
        "uid": "grove-groved",
        "description": "groved: throughput, errors, latency, batching, models and GPU memory (docs/metrics.md).",
        "tags": ["grove", "inference"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "annotations": {"list": []},
        "links": [],
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []},
            variable("job", "Job", "label_values(grove_build_info, job)"),
            variable("instance", "Instance", 'label_values(grove_build_info{job=~"$job"}, instance)'),
            variable("model", "Model", 'label_values(grove_model_ready{job=~"$job", instance=~"$instance"}, model)'),
        ]},
        "panels": panels(),
    }


def main():
    text = json.dumps(dashboard(), indent=2) + "\n"
    if "--check" in sys.argv[1:]:
        with open(TARGET, encoding="utf-8") as f:
            if f.read() != text:
                print(f"{os.path.relpath(TARGET)} is out of date: run {sys.argv[0]}", file=sys.stderr)
                return 1
        return 0
    with open(TARGET, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

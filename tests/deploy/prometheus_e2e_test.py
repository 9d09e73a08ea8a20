#!/usr/bin/env python3
"""Real Prometheus scraping real groved under load (CTest deploy_prometheus, label `deploy`).

  1. groved serves a small repository from tests/golden (three models, three formats).
  2. Prometheus (the Debian package's /usr/bin/prometheus) scrapes it every second with
     deploy/prometheus/grove-rules.yaml loaded, the target labelled like the Prometheus Operator's
     PodMonitor does (job="grove", namespace, pod).
  3. Load: `grove bench` (open loop at a fixed rate, predict and explain) when the grove CLI has
     remote mode, plus a Python grpcio client (stubs generated from proto/ here) for what bench does not send: explain
     with interactions, ExplainStream, metadata calls, KServe ModelInfer and calls that fail
     (NOT_FOUND, INVALID_ARGUMENT) so that error series exist.
  4. Through Prometheus's HTTP API, with the load running: every query of every dashboard panel
     (Grafana variables substituted), every dashboard variable, every recording rule (its expression
     and its recorded series) and the prometheus-adapter queries return data; every rule evaluates
     without error; the metrics the dashboard, rules and adapter select are exported by groved.
     A groved without GPU (CPU build, or no visible GPU) exports no GPU-memory series: then a second,
     synthetic target serves those series in the documented format so that the GPU panels' and
     rules' queries are still evaluated (and the report says so).
  5. `promtool check rules` on the rules file; differences between docs/metrics.md and the real
     exposition (families, types, label names) are reported and fail the test.
"""
import argparse
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_lib as d  # noqa: E402

RATE_INTERVAL = "20s"   # $__rate_interval: >= 4 scrape intervals (1 s)
NAMESPACE, POD = "grove-test", "grove-test-0"


# ---------------------------------------------------------------------------------------------------
# Load

def generate_stubs(proto_dir, out_dir):
    from grpc_tools import protoc  # noqa: PLC0415
    import grpc_tools  # noqa: PLC0415
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    os.makedirs(out_dir, exist_ok=True)
    for proto in ("grove/v1/grove.proto", "inference/grpc_service.proto"):
        rc = protoc.main(["protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out_dir}",
                          f"--grpc_python_out={out_dir}", os.path.join(proto_dir, proto)])
        if rc != 0:
            raise RuntimeError(f"protoc failed on {proto}")
    sys.path.insert(0, out_dir)


class PythonLoad:
    """Mixed traffic from a few threads until stop() (grpcio, stubs from proto/)."""

    def __init__(self, address, models, threads=3):
        import grpc  # noqa: PLC0415
        from grove.v1 import grove_pb2, grove_pb2_grpc  # noqa: PLC0415
        from inference import grpc_service_pb2, grpc_service_pb2_grpc  # noqa: PLC0415
        self.grpc, self.pb, self.kpb = grpc, grove_pb2, grpc_service_pb2
        self.channel = grpc.insecure_channel(address)
        self.stub = grove_pb2_grpc.GroveStub(self.channel)
        self.kstub = grpc_service_pb2_grpc.GRPCInferenceServiceStub(self.channel)
        self.models = models
        self.stop_event = threading.Event()
        self.counts = {}
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(threads)]

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_event.set()
        for t in self.threads:
            t.join(30)
        self.channel.close()

    def matrix(self, rows, cols, rng):
        values = [rng.uniform(-2, 2) if rng.random() > 0.05 else float("nan") for _ in range(rows * cols)]
        return self.pb.Matrix(rows=rows, cols=cols, values=values)

    def count(self, what, call):
        try:
            call()
            code = "OK"
        except self.grpc.RpcError as e:
            code = e.code().name
        with self.lock:
            self.counts[(what, code)] = self.counts.get((what, code), 0) + 1

    def run(self, seed):
        rng = random.Random(seed)
        pb, kpb = self.pb, self.kpb
        names = sorted(self.models)
        step = 0
        while not self.stop_event.is_set():
            step += 1
            model = names[step % len(names)]
            f = self.models[model]
            rows = rng.choice([1, 1, 3, 8, 40, 200])
            t = 10
            self.count("Predict", lambda: self.stub.Predict(pb.PredictRequest(
                model=model, rows=self.matrix(rows, f, rng),
                outputs=[pb.OUTPUT_PREDICTION, pb.OUTPUT_MARGIN]), timeout=t))
            self.count("Explain", lambda: self.stub.Explain(pb.ExplainRequest(
                model=model, rows=self.matrix(min(rows, 16), f, rng), top_k=2), timeout=t))
            if step % 3 == 0:
                self.count("Explain+interactions", lambda: self.stub.Explain(pb.ExplainRequest(
                    model="regression", rows=self.matrix(2, self.models["regression"], rng), interactions=True),
                    timeout=t))
            if step % 5 == 0:
                msgs = [pb.ExplainRequest(model=model, rows=self.matrix(4, f, rng), sequence=i) for i in range(3)]
                self.count("ExplainStream", lambda: list(self.stub.ExplainStream(iter(msgs), timeout=t)))
                raw = struct.pack(f"<{rows * f}f", *[rng.uniform(-2, 2) for _ in range(rows * f)])
                self.count("ModelInfer", lambda: self.kstub.ModelInfer(kpb.ModelInferRequest(
                    model_name=model, inputs=[kpb.ModelInferRequest.InferInputTensor(
                        name="input__0", datatype="FP32", shape=[rows, f])],
                    raw_input_contents=[raw]), timeout=t))
                self.count("ListModels", lambda: self.stub.ListModels(pb.ListModelsRequest(), timeout=t))
                self.count("GetModelMetadata", lambda: self.stub.GetModelMetadata(
                    pb.GetModelMetadataRequest(model=model), timeout=t))
            if step % 7 == 0:
                # Failures the server counts: unknown model, wrong feature count.
                self.count("Predict unknown model", lambda: self.stub.Predict(pb.PredictRequest(
                    model="no-such-model", rows=self.matrix(1, f, rng)), timeout=t))
                self.count("Predict wrong shape", lambda: self.stub.Predict(pb.PredictRequest(
                    model=model, rows=self.matrix(1, f + 1, rng)), timeout=t))
            time.sleep(0.01)


def start_bench(grove, address, models, workdir, duration):
    """`grove bench` processes (predict and explain), or [] when this grove has no remote mode."""
    if not grove or not os.path.exists(grove):
        print("note: no grove CLI given; load from the Python client only")
        return []
    version = subprocess.run([grove, "version"], capture_output=True, text=True).stdout
    help_text = subprocess.run([grove, "help", "bench"], capture_output=True, text=True)
    if "remote mode: yes" not in version or help_text.returncode != 0:
        print(f"note: `grove bench` unavailable ({version.strip()}); load from the Python client only")
        return []
    procs = []
    rng = random.Random(7)
    # Open loop at a fixed rate: steady load that does not take every core of a shared CI machine.
    for model, op, rate, rows in (("multiclass", "predict", 300, 32), ("binary", "explain", 100, 8)):
        csv = os.path.join(workdir, f"{model}.csv")
        with open(csv, "w") as out:
            for _ in range(256):
                out.write(",".join(f"{rng.uniform(-2, 2):.4f}" for _ in range(models[model])) + "\n")
        argv = [grove, "bench", "--server", address, "--model", model, "--operation", op,
                "--rate", str(rate), "--rows-per-request", str(rows), "--duration", str(duration),
                "--input", csv, "--json"]
        log = open(os.path.join(workdir, f"bench-{model}-{op}.json"), "w")
        err = open(os.path.join(workdir, f"bench-{model}-{op}.log"), "w")
        procs.append((argv, subprocess.Popen(argv, stdout=log, stderr=err), log))
    return procs


# ---------------------------------------------------------------------------------------------------
# Prometheus

SYNTHETIC_GPU_EXPOSITION = """\
# HELP grove_gpu_memory_used_bytes GPU memory in use (synthetic: this groved has no GPU).
# TYPE grove_gpu_memory_used_bytes gauge
grove_gpu_memory_used_bytes{device="cuda:0"} 2.5e+09
# HELP grove_gpu_memory_total_bytes GPU memory capacity (synthetic: this groved has no GPU).
# TYPE grove_gpu_memory_total_bytes gauge
grove_gpu_memory_total_bytes{device="cuda:0"} 8.5e+10
"""


def serve_synthetic_gpu_target():
    """An HTTP /metrics with the GPU series of docs/metrics.md, for groved builds without a GPU, so
    that the GPU panels' and rules' queries are still evaluated (on series in the documented format).
    Returns (server, "127.0.0.1:port")."""
    import http.server  # noqa: PLC0415

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = SYNTHETIC_GPU_EXPOSITION.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"127.0.0.1:{server.server_address[1]}"


class Prometheus:
    def __init__(self, binary, workdir, metrics_port, synthetic_gpu=None):
        self.port = d.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = os.path.join(workdir, "prometheus.yml")
        rules = os.path.join(d.DEPLOY, "prometheus", "grove-rules.yaml")
        with open(config, "w") as out:
            out.write(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - {rules}
scrape_configs:
  - job_name: grove
    metrics_path: /metrics
    static_configs:
      - targets: ["127.0.0.1:{metrics_port}"]
        labels:
          namespace: {NAMESPACE}
          pod: {POD}
""")
            if synthetic_gpu:
                out.write(f"""      - targets: ["{synthetic_gpu}"]
        labels:
          namespace: {NAMESPACE}
          pod: {POD}-synthetic-gpu
""")
        self.log_path = os.path.join(workdir, "prometheus.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={os.path.join(workdir, 'tsdb')}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn",
             "--storage.tsdb.retention.time=1h"],
            stdout=self.log, stderr=subprocess.STDOUT)
        d.wait_for(lambda: self.ready(), 60, "Prometheus ready", proc=self.proc, interval=0.3)

    def ready(self):
        try:
            return d.http_get(self.url + "/-/ready", timeout=2)[0] == 200
        except OSError:
            return False

    def api(self, path, **params):
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params, doseq=True)}"
        try:
            _, body = d.http_get(url, timeout=10)
        except Exception as e:  # noqa: BLE001 (HTTP 400 for bad queries)
            body = getattr(e, "read", lambda: b"")().decode() or str(e)
        try:
            return json.loads(body)
        except ValueError:
            return {"status": "error", "error": body}

    def query(self, expr):
        """(ok, result list, error) of an instant query."""
        r = self.api("query", query=expr)
        if r.get("status") != "success":
            return False, [], r.get("error", r)
        return True, r["data"]["result"], ""

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def substitute(expr, instance, models):
    values = {
        "$__rate_interval": RATE_INTERVAL, "$__interval": "5s", "$__range": "5m",
        "$job": "grove", "$instance": re.escape(instance).replace("\\", "\\\\"), "$model": "(" + "|".join(sorted(models)) + ")",
        "${datasource}": "",
    }
    for k in sorted(values, key=len, reverse=True):
        expr = expr.replace(k, values[k])
    return expr


def adapter_substitute(query, operation):
    return (query.replace("<<.Series>>", "grove_inflight_rows")
            .replace("<<.LabelMatchers>>", f'namespace="{NAMESPACE}",pod=~"{POD}",operation="{operation}"')
            .replace("<<.GroupBy>>", "pod"))


def has_data(result):
    return len(result) > 0


# ---------------------------------------------------------------------------------------------------
# Exposition vs docs/metrics.md

def parse_exposition(text):
    """{family: {"type": t, "labels": set}} of a text exposition."""
    fams = {}
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            fams.setdefault(m.group(1), {"type": m.group(2), "labels": set()})
            continue
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s", line)
        if not m:
            continue
        fam = d.family(m.group(1))
        if fam not in fams:
            fam = m.group(1)
        labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ""))
        fams.setdefault(fam, {"type": "untyped", "labels": set()})["labels"] |= labels - {"le"}
    return fams


def compare_with_docs(f, exposition, gpu):
    docs = d.documented_metrics()
    real = {k: v for k, v in parse_exposition(exposition).items() if k.startswith("grove_")}
    for name, doc in docs.items():
        if name not in real:
            if name.startswith("grove_gpu_memory_") and not gpu:
                continue
            f.check(False, f"docs/metrics.md lists {name}, groved does not export it")
            continue
        f.check(real[name]["type"] == doc["type"],
                f"{name}: docs say {doc['type']}, groved exports {real[name]['type']}")
        f.check(real[name]["labels"] == doc["labels"] or not real[name]["labels"] and not doc["labels"],
                f"{name}: docs list labels {sorted(doc['labels'])}, groved exports {sorted(real[name]['labels'])}")
    for name in real:
        f.check(name in docs, f"groved exports {name}, docs/metrics.md does not list it")
    # Bucket boundaries: the documented latency and row-count buckets.
    text = d.read(os.path.join(d.ROOT, "docs", "metrics.md"))
    section = text[text.index("## Latency buckets"):text.index("## Metrics")]
    blocks = re.findall(r"^    ([0-9][0-9., ]+)$", section, re.M)
    if f.check(len(blocks) >= 2, "docs/metrics.md: latency and row-count bucket lists not found"):
        latency = [float(x) for x in blocks[0].split(",")]
        rows = [float(x) for x in blocks[1].split(",")]
        for name, want in (("grove_request_duration_seconds", latency), ("grove_queue_wait_seconds", latency),
                           ("grove_compute_duration_seconds", latency), ("grove_batch_size_rows", rows),
                           ("grove_request_rows", rows)):
            les = sorted({float(m) for m in re.findall(rf'^{name}_bucket{{[^}}]*le="([^"]+)"', exposition, re.M)
                          if m != "+Inf"})
            if les:
                f.check(les == want, f"{name} buckets {les} differ from docs/metrics.md {want}")
    return real


def evaluate_queries(f, prom, instance, models, gpu, synthetic=None, timeout=60):
    """Every dashboard query and variable, recording rule and adapter query through Prometheus's HTTP
    API (retried until `timeout`: rates and recording rules need a few samples), and rule health."""
    # Every query: retried for a while, since rates and recording rules need a few samples.
    checks = []
    dash = d.dashboard()
    for title, expr in d.dashboard_targets(dash):
        if d.gpu_only(expr) and synthetic and "grove_gpu_memory_" in expr:
            checks.append((f"panel {title!r} (synthetic GPU target)", substitute(expr, synthetic, models), expr))
        else:
            checks.append((f"panel {title!r}", substitute(expr, instance, models), expr))
    for r in d.recording_rules():
        checks.append((f"rule expr {r['record']}", r["expr"], r["expr"]))
        sel = ",".join(f'{k}="{v}"' for k, v in r.get("labels", {}).items())
        checks.append((f"recorded series {r['record']}", f"{r['record']}{{{sel}}}", r["expr"]))
    for series_q, metrics_q in d.adapter_queries():
        checks.append(("adapter seriesQuery", series_q, series_q))
        for op in ("predict", "explain"):
            checks.append((f"adapter metricsQuery ({op})", adapter_substitute(metrics_q, op), metrics_q))
    pending = list(checks)
    deadline = time.monotonic() + timeout
    results = {}
    while pending:
        still = []
        for name, expr, original in pending:
            ok, result, error = prom.query(expr)
            results[name] = (ok, result, error, expr, original)
            if not ok or not has_data(result):
                still.append((name, expr, original))
        pending = still
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(2)
    with_data = 0
    for name, (ok, result, error, expr, original) in results.items():
        f.check(ok, f"{name}: query error {error}\n    {expr}")
        if ok:
            with_data += f.check(has_data(result), f"{name}: no data\n    {expr}")
    print(f"{len(results)} queries evaluated, {with_data} returned data"
          + ("" if gpu else " (GPU memory series from the synthetic target)"))

    # Dashboard variables.
    for v in dash["templating"]["list"]:
        if v["type"] != "query":
            continue
        m = re.match(r"label_values\((.*),\s*(\w+)\)$", v["definition"])
        match = substitute(m.group(1), instance, models)
        r = prom.api("series", **{"match[]": match})
        vals = {s.get(m.group(2)) for s in r.get("data", [])} - {None}
        f.check(r.get("status") == "success" and vals, f"variable {v['name']}: no values ({r.get('error', '')})")
        if v["name"] == "model":
            f.check(vals >= set(models), f"variable model lists {sorted(vals)}, the repository has {sorted(models)}")
        print(f"variable {v['name']}: {sorted(vals)}")

    # Rules evaluate without error.
    r = prom.api("rules")
    groups = r.get("data", {}).get("groups", [])
    n = sum(len(g["rules"]) for g in groups)
    f.check(n == sum(len(g["rules"]) for g in d.rule_groups()), f"Prometheus loaded {n} rules")
    for g in groups:
        for rule in g["rules"]:
            f.check(rule.get("health") == "ok",
                    f"rule {rule.get('name')}: health {rule.get('health')} {rule.get('lastError', '')}")
            if rule.get("type") == "alerting" and rule.get("state") != "inactive":
                print(f"note: alert {rule['name']} is {rule['state']} under the test load")


# ---------------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--groved", required=True)
    ap.add_argument("--grove", default="")
    ap.add_argument("--proto-dir", default=os.path.join(d.ROOT, "proto"))
    ap.add_argument("--load-seconds", type=float, default=15, help="load before the queries start")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    prometheus_bin, promtool = d.tool("prometheus", "PROMETHEUS"), d.tool("promtool", "PROMTOOL")
    if not prometheus_bin or not promtool:
        d.skip("prometheus/promtool not installed (Debian package prometheus)")
    try:
        import grpc  # noqa: F401, PLC0415
        import grpc_tools  # noqa: F401, PLC0415
    except ImportError:
        d.skip("python grpcio/grpcio-tools not installed (scripts/install-deps.sh installs them)")

    f = d.Failures("deploy prometheus")
    rules = os.path.join(d.DEPLOY, "prometheus", "grove-rules.yaml")
    out = subprocess.run([promtool, "check", "rules", rules], capture_output=True, text=True)
    f.check(out.returncode == 0, f"promtool check rules:\n{out.stdout}{out.stderr}")

    work = tempfile.mkdtemp(prefix="grove-prom-")
    srv = prom = load = synthetic_server = None
    bench = []
    try:
        models = d.make_model_repository(os.path.join(work, "models"))
        srv = d.Groved([args.groved, f"--model_repository={os.path.join(work, 'models')}", "--grpc_port=0",
                        "--metrics_port=0", "--grpc_address=127.0.0.1", "--metrics_address=127.0.0.1",
                        "--http_port=0", "--http_address=127.0.0.1", f"--port_file={os.path.join(work, 'ports.json')}", "--compute_threads=2"],
                       log_path=os.path.join(work, "groved.log"))
        srv.port_file = os.path.join(work, "ports.json")
        ports = srv.wait_ports(120)
        address = f"127.0.0.1:{ports['grpc_port']}"
        instance = f"127.0.0.1:{ports['metrics_port']}"
        _, first = d.http_get(f"http://{instance}/metrics")
        gpu = "grove_gpu_memory_total_bytes" in first
        print(f"groved exports GPU memory series: {gpu}")
        synthetic = None
        if not gpu:
            synthetic_server, synthetic = serve_synthetic_gpu_target()
            print(f"no GPU: GPU-only queries are evaluated on a synthetic target {synthetic} serving the "
                  f"documented GPU series")
        prom = Prometheus(prometheus_bin, work, ports["metrics_port"], synthetic)

        generate_stubs(args.proto_dir, os.path.join(work, "stubs"))
        load = PythonLoad(address, models)
        load.start()
        # bench runs through the queries below, then ends by itself and reports.
        bench = start_bench(args.grove, address, models, work, duration=args.load_seconds + 15)
        time.sleep(args.load_seconds)

        _, exposition = d.http_get(f"http://{instance}/metrics")
        real = compare_with_docs(f, exposition, gpu)
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as tmp:
            tmp.write(exposition)
            tmp.flush()
            pc = subprocess.run([promtool, "check", "metrics"], stdin=open(tmp.name), capture_output=True, text=True)
            f.check(pc.returncode == 0, f"promtool check metrics:\n{pc.stdout}{pc.stderr}")

        evaluate_queries(f, prom, instance, models, gpu, synthetic)
        dash = d.dashboard()

        # Every metric the dashboard, rules and adapter select is exported by this groved.
        records = {r["record"] for r in d.recording_rules()}
        selected = set()
        for _, expr in list(d.dashboard_targets(dash)) + [(None, r["expr"]) for g in d.rule_groups()
                                                           for r in g["rules"]]:
            selected |= {m for m in d.metric_names(expr) if m not in records and m != "up"}
        selected |= {m for s, _ in d.adapter_queries() for m in d.metric_names(s)}
        for m in sorted(selected):
            fam = d.family(m)
            if fam.startswith("grove_gpu_memory_") and not gpu:
                continue
            f.check(fam in real, f"the dashboard/rules query {m}, which groved does not export")

        # The load itself: what was sent and answered.
        load.stop()
        load_counts = dict(load.counts)
        load = None
        print("python load:", ", ".join(f"{w} {c}: {n}" for (w, c), n in sorted(load_counts.items())))
        f.check(load_counts.get(("Predict", "OK"), 0) > 0, "no Predict call succeeded")
        for argv, proc, log in bench:
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()
            what = " ".join(argv[4:10])
            f.check(proc.returncode == 0, f"grove bench {what} exited {proc.returncode}")
            try:
                report = json.loads(d.read(log.name))
            except ValueError:
                f.check(False, f"grove bench {what}: no JSON report: {d.read(log.name)[:500]}")
                continue
            print(f"grove bench {what}: {json.dumps(report)[:400]}")
            f.check(report.get("requests_ok", 0) > 0 and report.get("requests_failed", 1) == 0,
                    f"grove bench {what}: {report.get('requests_ok')} ok, {report.get('requests_failed')} failed")
        if f.errors:
            print(srv.tail(30))
    finally:
        if load:
            load.stop()
        for _, proc, _ in bench:
            if proc.poll() is None:
                proc.kill()
        if prom:
            prom.close()
        if synthetic_server:
            synthetic_server.shutdown()
        if srv:
            srv.close()
        if args.keep:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return f.finish()


if __name__ == "__main__":
    sys.exit(main())

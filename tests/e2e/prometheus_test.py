"""(f) A real Prometheus server scrapes groved; the key series are queryable through its HTTP API,
and `promtool check metrics` accepts groved's exposition (docs/metrics.md).

Traffic comes from `grove bench` (predict and explain) and a failing call (unknown model).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groved_harness as h  # noqa: E402


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def main():
    args = h.parse_args()
    prometheus = shutil.which("prometheus")
    promtool = shutil.which("promtool")
    if not prometheus or not promtool:
        h.skip("prometheus / promtool not installed (Debian package prometheus)")

    f = h.Failures()
    work = tempfile.mkdtemp(prefix="grove_prom_")
    repo = os.path.join(work, "repo")
    cases = [c for c in h.corpus_cases(args.source_dir, shared=False)
             if c[2].get("library", "") == "xgboost"][:2]
    if not cases:
        print("FAIL: no golden XGBoost case")
        return 1
    for name, d, meta, model in cases:
        h.install_model(repo, name, 1, model)
    prom = None
    try:
        with h.Groved(args.groved, repo, ["--repository_poll_seconds=0"]) as server:
            metrics_url = f"http://127.0.0.1:{server.metrics_port}/metrics"
            h.wait_ready(lambda: "grove_" in get(metrics_url))
            name0 = cases[0][0]
            x0 = os.path.join(cases[0][1], "X.csv")
            for op in ("predict", "explain"):
                r = subprocess.run([args.grove, "bench", "--server", server.target, "--model", name0,
                                    "--input", x0, "--operation", op, "--concurrency", "4",
                                    "--rows-per-request", "8", "--duration", "1", "--warmup", "0",
                                    "--json"], capture_output=True, text=True, timeout=120)
                f.check(r.returncode == 0, f"grove bench {op}: {r.stdout} {r.stderr}")
            r = subprocess.run([args.grove, "predict", "--server", server.target, "--model",
                                "no_such_model", "--input", x0, "--no-progress"],
                               capture_output=True, text=True, timeout=60)
            f.check(r.returncode == 1 and "NOT_FOUND" in r.stderr, f"unknown model: {r.stderr}")

            # promtool accepts the exposition.
            text = get(metrics_url)
            check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                                   text=True, timeout=60)
            f.check(check.returncode == 0,
                    f"promtool check metrics: {check.stdout}{check.stderr}")
            for series in ("grove_requests_total", "grove_request_duration_seconds_bucket",
                           "grove_queue_wait_seconds_bucket", "grove_compute_duration_seconds_bucket",
                           "grove_batch_size_rows_bucket", "grove_rows_total",
                           "grove_queue_depth_rows", "grove_model_ready", "grove_model_bytes",
                           "grove_model_load_duration_seconds", "grove_batches_total",
                           "grove_build_info", "grove_server_ready"):
                f.check(series in text, f"{series} missing from the exposition")

            # A real Prometheus scrapes it every second.
            port = free_port()
            config = os.path.join(work, "prometheus.yml")
            with open(config, "w") as out:
                out.write(
                    "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: groved\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{server.metrics_port}']\n")
            prom_log = open(os.path.join(work, "prometheus.log"), "w")
            prom = subprocess.Popen([prometheus, f"--config.file={config}",
                                     f"--storage.tsdb.path={os.path.join(work, 'tsdb')}",
                                     f"--web.listen-address=127.0.0.1:{port}"],
                                    stdout=prom_log, stderr=subprocess.STDOUT)
            base = f"http://127.0.0.1:{port}"
            h.wait_ready(lambda: "Ready" in get(f"{base}/-/ready"), timeout=60)

            def query(q):
                body = json.loads(get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": q})))
                return body["data"]["result"] if body.get("status") == "success" else []

            queries = {
                'up{job="groved"} == 1': None,
                f'grove_requests_total{{model="{name0}",method="Predict",code="OK"}} > 0': None,
                f'grove_requests_total{{model="{name0}",method="Explain",code="OK"}} > 0': None,
                'grove_requests_total{model="_unknown",code="NOT_FOUND"} > 0': None,
                f'grove_rows_total{{model="{name0}",operation="predict"}} > 0': None,
                f'grove_rows_total{{model="{name0}",operation="explain"}} > 0': None,
                'histogram_quantile(0.99, sum by (le) (grove_request_duration_seconds_bucket'
                f'{{model="{name0}",method="Predict"}})) > 0': None,
                f'grove_batch_size_rows_count{{model="{name0}",operation="predict"}} > 0': None,
                f'grove_model_ready{{model="{name0}",version="1"}} == 1': None,
                f'grove_model_bytes{{model="{name0}",device="host"}} > 0': None,
                'grove_build_info == 1': None,
            }
            end = time.time() + 60
            pending = list(queries)
            while pending and time.time() < end:
                pending = [q for q in pending if not query(q)]
                if pending:
                    time.sleep(0.5)
            for q in pending:
                f.check(False, f"no result for {q}")
            # Rates need two scrapes of changing counters: more traffic, then rate() answers.
            subprocess.run([args.grove, "bench", "--server", server.target, "--model", name0,
                            "--input", x0, "--concurrency", "2", "--duration", "3", "--warmup",
                            "0"], capture_output=True, timeout=60)
            rate_q = f'sum(rate(grove_rows_total{{model="{name0}"}}[10s])) > 0'
            end = time.time() + 20
            while not query(rate_q) and time.time() < end:
                time.sleep(0.5)
            f.check(bool(query(rate_q)), f"no result for {rate_q}")
    finally:
        if prom is not None:
            prom.terminate()
            try:
                prom.wait(20)
            except subprocess.TimeoutExpired:
                prom.kill()
        shutil.rmtree(work, ignore_errors=True)
    f.finish("e2e_prometheus")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""REST load test for groved's KServe v2 port: N concurrent clients, each on its own kept-alive
HTTP/1.1 connection, sending infer requests back to back (closed loop) for a fixed time.

Reports requests/s, rows/s, latency percentiles and failures (by HTTP status) as text, or one JSON
object with --json. Bounded: it stops after --duration seconds (or --requests per client) and sends
only to the address given (by default a groved it starts itself on 127.0.0.1 with ephemeral ports).

  bench/rest_load.py --groved build/cpu/bin/groved              # starts groved on examples/models
  bench/rest_load.py --url 127.0.0.1:8000 --model demo          # a running groved
Options: --clients 64 --duration 10 --rows-per-request 1 --input examples/rows.csv --json
         --processes P (the clients are spread over P processes, so that Python's interpreter lock
         is not the limit; default: one per core)
"""
import argparse
import http.client
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--url", help="HOST:PORT of a running groved's REST port")
    p.add_argument("--groved", help="start this groved on --repository instead of --url")
    p.add_argument("--repository", default=os.path.join(ROOT, "examples/models"))
    p.add_argument("--model", default="demo")
    p.add_argument("--input", default=os.path.join(ROOT, "examples/rows.csv"))
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--requests", type=int, default=0, help="stop each client after N requests")
    p.add_argument("--rows-per-request", type=int, default=1)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if bool(a.url) == bool(a.groved):
        p.error("give exactly one of --url and --groved")
    if not 1 <= a.clients <= 1024 or a.duration <= 0 or a.rows_per_request < 1:
        p.error("--clients must be 1..1024, --duration positive, --rows-per-request >= 1")
    a.processes = max(1, min(a.processes, a.clients))
    return a


def request_body(path, rows):
    """An infer request of `rows` rows of the CSV (cycled), missing values as null."""
    lines = [l for l in open(path).read().splitlines() if l.strip()]
    data = []
    for i in range(rows):
        fields = lines[i % len(lines)].split(",")
        data.append([None if f.strip().lower() in ("", "nan") else float(f) for f in fields])
    body = {"inputs": [{"name": "input__0", "shape": [rows, len(data[0])], "datatype": "FP32",
                        "data": data}]}
    return json.dumps(body).encode()


def client_loop(host, port, path, body, deadline, max_requests, out):
    conn = http.client.HTTPConnection(host, port, timeout=60)
    latencies, failures = [], {}
    n = 0
    while time.monotonic() < deadline and (max_requests == 0 or n < max_requests):
        start = time.monotonic()
        try:
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            status = resp.status
        except (OSError, http.client.HTTPException) as e:
            status = type(e).__name__
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=60)
        n += 1
        if status == 200:
            latencies.append(time.monotonic() - start)
        else:
            failures[str(status)] = failures.get(str(status), 0) + 1
    conn.close()
    out.append((latencies, failures))


def process_main(host, port, path, body, clients, deadline_in, max_requests, queue):
    deadline = time.monotonic() + deadline_in
    results = []
    threads = [threading.Thread(target=client_loop,
                                args=(host, port, path, body, deadline, max_requests, results))
               for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queue.put(results)


def start_groved(binary, repository):
    work = tempfile.mkdtemp(prefix="grove_rest_load_")
    port_file = os.path.join(work, "ports.json")
    log = open(os.path.join(work, "groved.log"), "w")
    proc = subprocess.Popen([binary, f"--model_repository={repository}", "--grpc_address=127.0.0.1",
                             "--grpc_port=0", "--metrics_port=-1", "--http_address=127.0.0.1",
                             "--http_port=0", f"--port_file={port_file}"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    end = time.time() + 120
    while time.time() < end:
        if os.path.exists(port_file):
            return proc, json.load(open(port_file))["http_port"]
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    sys.exit(f"rest_load: groved did not start; see {log.name}")


def percentile(sorted_values, q):
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def main():
    a = parse_args()
    proc = None
    if a.groved:
        proc, port = start_groved(a.groved, a.repository)
        host = "127.0.0.1"
    else:
        host, _, port = a.url.rpartition(":")
        port = int(port)
    try:
        path = f"/v2/models/{a.model}/infer"
        body = request_body(a.input, a.rows_per_request)
        queue = multiprocessing.Queue()
        share = [a.clients // a.processes + (i < a.clients % a.processes) for i in range(a.processes)]
        start = time.monotonic()
        procs = [multiprocessing.Process(target=process_main, args=(
                     host, port, path, body, n, a.duration, a.requests, queue)) for n in share]
        for p in procs:
            p.start()
        results = [r for _ in procs for r in queue.get()]
        for p in procs:
            p.join()
        elapsed = time.monotonic() - start
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    latencies = sorted(l for ls, _ in results for l in ls)
    failures = {}
    for _, fs in results:
        for k, v in fs.items():
            failures[k] = failures.get(k, 0) + v
    report = {
        "clients": a.clients, "processes": a.processes, "rows_per_request": a.rows_per_request,
        "seconds": round(elapsed, 3), "requests": len(latencies),
        "requests_per_second": round(len(latencies) / elapsed, 1),
        "rows_per_second": round(len(latencies) * a.rows_per_request / elapsed, 1),
        "p50_ms": round(percentile(latencies, 0.50) * 1e3, 3),
        "p90_ms": round(percentile(latencies, 0.90) * 1e3, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1e3, 3),
        "failures": failures,
    }
    if a.json:
        print(json.dumps(report))
    else:
        print(f"{report['requests']} requests in {report['seconds']} s from {a.clients} kept-alive "
              f"clients ({a.processes} processes): {report['requests_per_second']} requests/s, "
              f"{report['rows_per_second']} rows/s; latency p50 {report['p50_ms']} ms, p90 "
              f"{report['p90_ms']} ms, p99 {report['p99_ms']} ms; failures {failures or 'none'}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())

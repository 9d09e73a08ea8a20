#!/usr/bin/env python3
"""bench/rest_load.py end to end: it starts a real groved on examples/models, drives its REST port
with kept-alive clients spread over two processes for a moment, and reports JSON whose counts add
up (every request answered 200, none failed). The figures are not checked, the machinery is.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench/rest_load.py"),
                          "--groved", os.environ["GROVED"], "--clients", "6", "--processes", "2",
                          "--duration", "1", "--rows-per-request", "3", "--json"],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["clients"] == 6 and report["processes"] == 2, report
    assert report["requests"] > 0 and report["failures"] == {}, report
    assert abs(report["rows_per_second"] - 3 * report["requests_per_second"]) < 0.5, report
    assert 0 < report["p50_ms"] <= report["p90_ms"] <= report["p99_ms"], report
    print("rest_load:", out.stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""bench/overload.sh (docs/benchmarks/serving.md, "Overload") run for real on a small model:
groved starts, the closed loop measures a capacity, one open loop at 2x runs with a deadline, and
the table, the bench reports and the metrics scrapes are written. Short runs: the machinery is
checked, not the figures (those need a quiet machine, see docs/benchmarks/serving.md)."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        env = dict(os.environ, MODEL="tests/golden/xgb_regression/model.json",
                   DATA="tests/golden/xgb_regression/X.csv", LABEL_INDEX="-1", D="1", WARMUP="0",
                   LOADS="2", OPS="explain:4 predict:1", CONCURRENCY="4", OUT_DIR=out)
        r = subprocess.run(["bash", "bench/overload.sh"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=240)
        assert r.returncode == 0, r.stderr[-3000:]
        table = open(os.path.join(out, "overload.md")).read()
        rows = [l for l in table.splitlines() if l.startswith("| explain") or l.startswith("| predict")]
        assert len(rows) == 4, table
        for op in ("explain", "predict"):
            report = json.load(open(os.path.join(out, f"{op}-2x.json")))
            for field in ("offered_per_second", "failure_latency_ms", "requests_ok"):
                assert field in report, (op, field, report)
            metrics = open(os.path.join(out, f"{op}-2x.metrics")).read()
            assert "grove_delivered_tasks_total" in metrics, metrics[:2000]
            assert "grove_dropped_tasks_total" in metrics, metrics[:2000]
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Single-row latency of groveml in-process: Model.predict_row on the calling thread, the result
written into a preallocated array (what an embedding service calls per request).

  PYTHONPATH=build/cpu/python python3 bench/groveml_row_bench.py MODEL ROWS.csv [--calls 100000]

Rows: the CSV's first 10,000 rows (a trailing label column, when there is one more column than
the model has features, is dropped; empty fields are missing values), cycled through. Prints the
p50 / p99 / p99.9 / max latency in microseconds over `calls` calls after 10,000 unmeasured ones.
"""
import argparse
import time

import numpy as np

import groveml


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("rows")
    ap.add_argument("--calls", type=int, default=100000)
    ap.add_argument("--kind", default="prediction")
    a = ap.parse_args()
    model = groveml.Model(a.model, device="cpu")
    x = np.genfromtxt(a.rows, delimiter=",", max_rows=10000, dtype=np.float32, ndmin=2)
    if x.shape[1] == model.num_features + 1:
        x = x[:, :-1]
    x = np.ascontiguousarray(x)
    out = np.empty(model._engine.predict_width(a.kind, 0, 0), np.float32)
    us = np.empty(a.calls)
    n = len(x)
    for i in range(-10000, a.calls):
        row = x[i % n]
        t = time.perf_counter_ns()
        model.predict_row(row, a.kind, out=out)
        if i >= 0:
            us[i] = (time.perf_counter_ns() - t) / 1e3
    p50, p99, p999 = np.percentile(us, [50, 99, 99.9])
    print(f"groveml predict_row | {a.model} | {a.calls} calls | p50 {p50:.2f} us | p99 {p99:.2f} us"
          f" | p99.9 {p999:.2f} us | max {us.max():.2f} us")


if __name__ == "__main__":
    main()

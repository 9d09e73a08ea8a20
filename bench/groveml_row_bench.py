#!/usr/bin/env python3
"""Single-row latency of groveml in-process, per input kind: Model.predict_row on the calling
thread (the result written into a preallocated array: what an embedding service calls per
request), and Model.predict / Model.rows on one row given as a 2-D array, a 1-row pandas
DataFrame, a pandas Series or a dict {feature: value}.

  PYTHONPATH=build/cpu/python python3 bench/groveml_row_bench.py MODEL ROWS.csv [--calls 100000]
  PYTHONPATH=build/cpu/python python3 bench/groveml_row_bench.py --features 30 [--trees 100]

Rows: the CSV's first 10,000 rows (a trailing label column, when there is one more column than
the model has features, is dropped; empty fields are missing values), cycled through. With
--features N (and no MODEL), an XGBoost regressor of N features and --trees trees (depth 6) is
trained here on 10,000 seeded random rows, which are the rows. Prints the p50 / p99 / p99.9 / max
latency in microseconds of each call over `calls` calls after 10% more unmeasured ones.
"""
import argparse
import os
import tempfile
import time

import numpy as np

import groveml

CASES = ("predict_row", "predict numpy", "rows DataFrame", "predict DataFrame -> numpy",
         "predict DataFrame", "predict Series -> numpy", "predict dict")


def trained_model(features, trees):
    import xgboost as xgb
    rng = np.random.default_rng(1)
    x = rng.normal(size=(10000, features))
    y = x[:, 0] + x[:, 1] * x[:, 2] + np.sin(x[:, 3 % features]) + rng.normal(scale=0.1, size=len(x))
    names = [f"feature_{j}" for j in range(features)]
    booster = xgb.train({"max_depth": 6, "eta": 0.1, "nthread": 2},
                        xgb.DMatrix(x, label=y, feature_names=names), num_boost_round=trees)
    path = os.path.join(tempfile.mkdtemp(), "model.json")
    booster.save_model(path)
    return path, x


def measure(call, inputs, calls):
    n = len(inputs)
    us = np.empty(calls)
    for i in range(-(calls // 10), calls):
        item = inputs[i % n]
        t = time.perf_counter_ns()
        call(item)
        if i >= 0:
            us[i] = (time.perf_counter_ns() - t) / 1e3
    return us


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?")
    ap.add_argument("rows", nargs="?")
    ap.add_argument("--features", type=int, help="train a model of this many features")
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--calls", type=int, default=100000)
    ap.add_argument("--kind", default="prediction")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    a = ap.parse_args()
    if a.features:
        a.model, x = trained_model(a.features, a.trees)
    elif a.model and a.rows:
        x = None
    else:
        ap.error("give MODEL ROWS.csv, or --features N")
    model = groveml.Model(a.model, device="cpu")
    if x is None:
        x = np.genfromtxt(a.rows, delimiter=",", max_rows=10000, dtype=np.float64, ndmin=2)
        if x.shape[1] == model.num_features + 1:
            x = x[:, :-1]
    x = x[:1000]
    x32 = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty(model._engine.predict_width(a.kind, 0, 0), np.float32)
    cases = {"predict_row": (lambda r: model.predict_row(r, a.kind, out=out), list(x32))}
    needs_pandas = any(c in a.cases for c in ("DataFrame", "Series", "dict"))
    if needs_pandas:
        import pandas as pd
        frames = [pd.DataFrame(x[i:i + 1], columns=model.feature_names) for i in range(len(x))]
        cases.update({
            "rows DataFrame": (model.rows, frames),
            "predict DataFrame -> numpy": (
                lambda f: model.predict(f, a.kind, output_format="numpy"), frames),
            "predict DataFrame": (lambda f: model.predict(f, a.kind), frames),
            "predict Series -> numpy": (
                lambda s: model.predict(s, a.kind, output_format="numpy"),
                [f.iloc[0] for f in frames]),
            "predict dict": (lambda d: model.predict(d, a.kind),
                             [dict(zip(model.feature_names, r.tolist())) for r in x]),
        })
    cases["predict numpy"] = (lambda r: model.predict(r, a.kind), [x[i:i + 1] for i in range(len(x))])
    for name in a.cases.split(","):
        call, inputs = cases[name]
        us = measure(call, inputs, a.calls)
        p50, p99, p999 = np.percentile(us, [50, 99, 99.9])
        print(f"groveml {name} | {model.num_features} features, {model.num_trees} trees | "
              f"{a.calls} calls | p50 {p50:.2f} us | p99 {p99:.2f} us | p99.9 {p999:.2f} us | "
              f"max {us.max():.2f} us")


if __name__ == "__main__":
    main()

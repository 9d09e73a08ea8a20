#!/usr/bin/env python3
"""Interventional SHAP on the CPU: groveml against shap's TreeExplainer, same rows, same background,
same machine, both in process:

  grove  groveml.Model(MODEL, device="cpu", threads=T).explain(X, background=B) (margin space)
  shap   shap.TreeExplainer(booster, data=shap.maskers.Independent(B, max_samples=len(B)),
         feature_perturbation="interventional", model_output="raw").shap_values(X) (its C++
         extension; one thread whatever T)

Rows: the dataset's first 10,000 rows (features only, float32; or --csv, a file of feature rows
without a header), the first --rows of them explained; background: --background rows from row
10,000 on (from the end of the file, for smaller ones).
Each system: one untimed call on a few rows, then up to --repeats timed calls, fewer once their
time passes --budget seconds (the median is reported). Multi-class models: Grove's classes
(each F + 1 values) are compared with shap's (rows x F x classes). The two answers are compared
(largest difference relative to the largest |value|); exit 1 if above --tolerance.

  PYTHONPATH=build/cpu/python:SHAP_SITE python3 bench/interventional_cpu_compare.py \\
      --model ../shared/bench-models/adult-med.ubj --dataset adult --rows 1000 --background 100 \\
      --threads 2
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "shared"))


def load_base(datasets_dir, dataset):
    with open(os.path.join(datasets_dir, dataset + ".json")) as f:
        meta = json.load(f)
    df = pd.read_csv(os.path.join(datasets_dir, meta["file"]), header=None, names=meta["columns"],
                     nrows=20000, dtype=np.float32, na_values=[""], keep_default_na=False)
    return np.ascontiguousarray(df.iloc[:, :-1].to_numpy(dtype=np.float32))


def timed_median(fn, repeats, budget):
    times = []
    out = None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
        if sum(times) > budget:
            break
    return statistics.median(times), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--dataset", help="a dataset of ../shared/datasets (its .json names the file)")
    ap.add_argument("--csv", help="instead of --dataset: feature rows, no header, no label")
    ap.add_argument("--datasets-dir", default=os.path.join(SHARED, "datasets"))
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--background", type=int, default=100)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=20.0)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()

    import groveml
    import shap
    import xgboost as xgb

    if (args.dataset is None) == (args.csv is None):
        sys.exit("give one of --dataset and --csv")
    if args.csv is not None:
        base = np.ascontiguousarray(np.loadtxt(args.csv, delimiter=",", dtype=np.float32, ndmin=2))
    else:
        base = load_base(args.datasets_dir, args.dataset)
    if args.rows > min(len(base), 10000):
        sys.exit(f"--rows {args.rows}: the dataset's first rows hold {min(len(base), 10000)}")
    x = np.ascontiguousarray(base[:args.rows])
    start = 10000 if len(base) >= 10000 + args.background else len(base) - args.background
    if start < 0:
        sys.exit(f"--background {args.background}: the dataset has {len(base)} rows")
    bg = np.ascontiguousarray(base[start:start + args.background])
    threads = args.threads or os.cpu_count()

    model = groveml.Model(args.model, device="cpu", threads=threads)
    model.explain(x[:8], background=bg)  # builds the background's engine, untimed
    grove_s, grove_out = timed_median(lambda: model.explain(x, background=bg), args.repeats,
                                      args.budget)
    booster = xgb.Booster()
    booster.load_model(args.model)
    classes = max(1, int(json.loads(booster.save_config())["learner"]["learner_model_param"]
                         ["num_class"]))
    # An Independent masker of the whole background: given the array itself, TreeExplainer keeps
    # a random 100 of its rows (the masker's default max_samples).
    masker = shap.maskers.Independent(bg, max_samples=len(bg))
    explainer = shap.TreeExplainer(booster, data=masker, feature_perturbation="interventional",
                                   model_output="raw")
    explainer.shap_values(x[:2])
    shap_s, shap_vals = timed_median(lambda: explainer.shap_values(x), args.repeats, args.budget)

    grove_vals = np.asarray(grove_out)
    shap_vals = np.asarray(shap_vals)
    features = x.shape[1]
    # Both as rows x classes x features (shap leaves the bias out: its expected_value).
    g = grove_vals.reshape(len(x), classes, -1)[:, :, :features]
    s = shap_vals.reshape(len(x), features, classes).transpose(0, 2, 1) if classes > 1 else \
        shap_vals.reshape(len(x), 1, features)
    scale = max(float(np.max(np.abs(s))), 1e-30)
    diff = float(np.max(np.abs(g.astype(np.float64) - s))) / scale
    rows = len(x)
    result = {"model": os.path.basename(args.model), "rows": rows, "background": len(bg),
              "threads": threads, "grove_rows_s": round(rows / grove_s, 1),
              "shap_rows_s": round(rows / shap_s, 1), "ratio": round(shap_s / grove_s, 2),
              "max_rel_diff": diff, "shap_version": shap.__version__,
              "groveml_version": getattr(groveml, "__version__", "?")}
    print(json.dumps(result))
    print(f"| {result['model']} | {rows} x {len(bg)} background | {threads} threads | "
          f"Grove {result['grove_rows_s']} rows/s | shap {result['shap_rows_s']} rows/s | "
          f"{result['ratio']}x | max rel diff {diff:.2e} |")
    return 1 if diff > args.tolerance else 0


if __name__ == "__main__":
    sys.exit(main())

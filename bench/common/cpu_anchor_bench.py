#!/usr/bin/env python3
"""One CPU anchor's prediction and SHAP throughput, for bench/cpu_compare.sh.

  cpu_anchor_bench.py SYSTEM MODEL ROWS.csv NAME --threads N [--batches 1000,100000,1000000]
      [--budget 0.5] [--shap-rows 5000] [--interaction-rows 200] [--shap-budget 2]

SYSTEM (each run in a process of its own, so that no two thread pools share it):
  xgboost   XGBoost models: inplace_predict margins; pred_contribs / pred_interactions on a
            DMatrix made before timing (nthread N for both).
  lightgbm  LightGBM models: predict(raw_score=True) and predict(pred_contrib=True), num_threads N
            (LightGBM has no interaction values).
  onedal    oneDAL through daal4py: daal4py.mb.convert_model of the XGBoost or LightGBM booster,
            then predict_proba (classifiers) or predict, and predict(pred_contribs /
            pred_interactions); daalinit(N).
Rows: the CSV's first 10,000 rows (a trailing label column, when there is one more column than the
model has features, is dropped; empty field = missing), repeated to each size as float32 C order:
the rows grove_predict_bench and grove_model_bench use. Timing is engine time (rows already in
memory): one warm-up call, then calls until the budget is spent or 15 calls (at least 3 for
prediction, 1 for SHAP); the median is reported.
Output: '# SYSTEM VERSION ...', then '| NAME | SYSTEM | TASK | ROWS | median ms | rows/s |' lines,
TASK one of predict, shap, interactions; a task that fails prints '# TASK failed: why' and the rest
still runs.
"""
import argparse
import os
import re
import sys
import time

import numpy as np

MAX_BASE_ROWS = 10000  # as grove_predict_bench


def load(system, model, threads):
    """(predict, shap, interactions, num_features, version) for `system`; None for what it lacks."""
    is_lightgbm = model.endswith(".txt")
    if system == "xgboost":
        import xgboost as xgb
        b = xgb.Booster()
        b.load_model(model)
        b.set_param({"nthread": threads})
        # The model's names and types (categorical splits need them on a DMatrix).
        types = b.feature_types
        dmatrix = lambda x: xgb.DMatrix(x, nthread=threads, feature_names=b.feature_names,
                                        feature_types=types,
                                        enable_categorical=bool(types and "c" in types))
        return (lambda x: b.inplace_predict(x, predict_type="margin"),
                (dmatrix, lambda d: b.predict(d, pred_contribs=True)),
                (dmatrix, lambda d: b.predict(d, pred_interactions=True)),
                b.num_features(), xgb.__version__)
    if system == "lightgbm":
        import lightgbm as lgb
        b = lgb.Booster(model_file=model)
        return (lambda x: b.predict(x, raw_score=True, num_threads=threads),
                (None, lambda x: b.predict(x, pred_contrib=True, num_threads=threads)),
                None, b.num_feature(), lgb.__version__)
    if system == "onedal":
        import daal4py as d4p
        d4p.daalinit(threads)
        if is_lightgbm:
            import lightgbm as lgb
            src = lgb.Booster(model_file=model)
        else:
            import xgboost as xgb
            src = xgb.Booster()
            src.load_model(model)
        m = d4p.mb.convert_model(src)
        predict = m.predict_proba if m.is_classifier_ else m.predict
        # _get__version__() is "(2026, 2, 0, '\"P\"')" (a tuple's text): keep the numbers.
        version = ".".join(re.findall(r"\d+", str(d4p._get__version__()))[:3])
        return (predict,
                (None, lambda x: m.predict(x, pred_contribs=True)),
                (None, lambda x: m.predict(x, pred_interactions=True)),
                m.n_features_in_, f"{version} (threads {d4p.num_threads()})")
    raise ValueError(f"unknown system {system}")


def median_seconds(fn, budget, min_runs):
    """Median seconds of `fn` after one warm-up call: calls until `budget` s or 15 (>= min_runs)."""
    fn()
    times = []
    end = time.perf_counter() + budget
    while len(times) < 15 and (len(times) < min_runs or time.perf_counter() < end):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("system", choices=["xgboost", "lightgbm", "onedal"])
    ap.add_argument("model")
    ap.add_argument("rows")
    ap.add_argument("name")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--batches", default="1000,100000,1000000")
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--shap-rows", type=int, default=5000)
    ap.add_argument("--interaction-rows", type=int, default=200)
    ap.add_argument("--shap-budget", type=float, default=2.0)
    a = ap.parse_args()

    t = time.perf_counter()
    predict, shap, interactions, nf, version = load(a.system, a.model, a.threads)
    load_s = time.perf_counter() - t
    x = np.atleast_2d(np.genfromtxt(a.rows, delimiter=",", dtype=np.float32,
                                    max_rows=MAX_BASE_ROWS))
    if x.shape[1] == nf + 1:
        x = x[:, :-1]
    if x.shape[1] != nf:
        sys.exit(f"{a.rows}: {x.shape[1]} columns for a model of {nf} features")
    print(f"# {a.system} {version} | threads {a.threads} | cpus {os.cpu_count()} | "
          f"python {sys.version.split()[0]} | numpy {np.__version__} | load {load_s:.2f} s",
          flush=True)

    def tile(n):
        return np.ascontiguousarray(np.resize(x, (n, nf)))

    def failed(task, e):  # a library that cannot do this task on this model
        why = str(e).splitlines()[0] if str(e) else ""
        print(f"# {task} failed: {type(e).__name__}: {why}", flush=True)

    def report(task, n, fn, budget, min_runs):
        try:
            s = median_seconds(fn, budget, min_runs)
        except Exception as e:
            failed(task, e)
            return
        print(f"| {a.name} | {a.system} | {task} | {n} | {s * 1e3:.4f} | {n / s:.1f} |", flush=True)

    for n in [int(b) for b in a.batches.split(",") if b]:
        xn = tile(n)
        report("predict", n, lambda: predict(xn), a.budget, 3)
        del xn
    for task, n, how in (("shap", a.shap_rows, shap),
                         ("interactions", a.interaction_rows, interactions)):
        if how is None or n <= 0:
            continue
        prepare, fn = how
        try:
            data = prepare(tile(n)) if prepare else tile(n)
        except Exception as e:
            failed(task, e)
            continue
        report(task, n, lambda: fn(data), a.shap_budget, 1)

if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""groveml in-process SHAP on a GPU (device="cuda") against XGBoost's GPU SHAP (Booster with
device=cuda, pred_contribs=True), same rows (the dataset's first 10,000 rows, features only, float32,
repeated to --rows), same model file, same process. XGBoost is timed on a DMatrix built
beforehand (its best case) and with the DMatrix built from the host rows inside the timed region;
groveml always takes host rows (numpy) and returns numpy. Best of three runs after a warm-up; the
largest difference from XGBoost's values, relative to max(1, |margin|), is printed per model. One
JSON line per measurement.

  python3 bench/groveml_gpu_shap_bench.py --models ../shared/bench-models --datasets ../shared/datasets \
      --rows 1000000 --specs adult-med:adult,cal_housing-med:cal_housing
(groveml built with CUDA and xgboost with GPU support importable.)
"""
import argparse, json, sys, time
import numpy as np, pandas as pd

def rows_of(datasets, name, n):
    meta = json.load(open(f"{datasets}/{name}.json"))
    df = pd.read_csv(f"{datasets}/{meta['file']}", header=None, names=meta["columns"], nrows=10000,
                     dtype=np.float32, na_values=[""], keep_default_na=False)
    base = np.ascontiguousarray(df.iloc[:, :-1].to_numpy(dtype=np.float32))
    return np.ascontiguousarray(np.tile(base, (-(-n // len(base)), 1))[:n])

def best(fn, reps=3):
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return min(ts)

ap = argparse.ArgumentParser()
ap.add_argument("--models"); ap.add_argument("--datasets"); ap.add_argument("--rows", type=int, default=1000000)
ap.add_argument("--specs", default="adult-med:adult,cal_housing-med:cal_housing")
a = ap.parse_args()
import groveml, xgboost
print(json.dumps({"groveml_cuda": groveml.has_cuda, "gpus": groveml.visible_gpus() if callable(groveml.visible_gpus) else groveml.visible_gpus,
                  "xgboost": xgboost.__version__, "numpy": np.__version__, "python": sys.version.split()[0]}))
for spec in a.specs.split(","):
    model, data = spec.split(":")
    path = f"{a.models}/{model}.ubj"
    X = rows_of(a.datasets, data, a.rows)
    m = groveml.Model(path, device="cuda")
    m.explain(X[:10000])  # warm-up
    out = {}
    t = best(lambda: out.__setitem__("g", m.explain(X)))
    g = out["g"]
    b = xgboost.Booster(model_file=path); b.set_param({"device": "cuda"})
    d = xgboost.DMatrix(X)
    b.predict(xgboost.DMatrix(X[:10000]), pred_contribs=True)  # warm-up
    tx = best(lambda: out.__setitem__("x", b.predict(d, pred_contribs=True)))
    txe = best(lambda: b.predict(xgboost.DMatrix(X), pred_contribs=True), reps=2)
    x = out["x"].reshape(g.shape)
    margin = x.sum(axis=-1, keepdims=True)
    err = float(np.max(np.abs(g.astype(np.float64) - x) / np.maximum(1, np.abs(margin))))
    for eng, secs in (("groveml (numpy in, numpy out)", t), ("xgboost, DMatrix prebuilt", tx),
                      ("xgboost, DMatrix built per call", txe)):
        print(json.dumps({"model": model, "rows": a.rows, "engine": eng, "seconds": round(secs, 4),
                          "rows_per_s": round(a.rows / secs)}))
    print(json.dumps({"model": model, "max_rel_diff_vs_xgboost": err, "shape": list(g.shape)}))

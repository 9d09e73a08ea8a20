#!/usr/bin/env python3
"""Writes small XGBoost models saved by the *installed* XGBoost version, with reference outputs.

Used to check that the loader reads the layouts older releases wrote (1.0: booleans for default_left,
base_score "0.500000", no split_type; 1.x dart: name "dart" + gbtree.model + weight_drop beside it;
2.0 vector-leaf trees without leaf_weights, ...). Run once per release, each in its own virtualenv:

  python -m venv /tmp/v && /tmp/v/bin/pip install xgboost==1.7.6 "numpy<2" "scipy<1.12"
  /tmp/v/bin/python tests/model/data/make_xgb_fixtures.py tests/model/data

Each case directory `xgb<version>_<kind>/` holds the same files as a /work/shared/testdata case
(`model.json`, `model.ubj` when the release writes UBJSON (1.6+), `X.csv`, `margin.csv`, `leaf.csv`,
`meta.json`). Rows are float32 values written with %.9g so that they parse back exactly.
"""
import json
import os
import sys

import numpy as np
import xgboost as xgb

VERSION = xgb.__version__
MAJOR_MINOR = tuple(int(p) for p in VERSION.split(".")[:2])


def write_csv(path, a, fmt):
    with open(path, "w") as f:
        for row in np.atleast_2d(a):
            f.write(",".join("nan" if (isinstance(v, float) and np.isnan(v)) else fmt % v
                             for v in row.tolist()) + "\n")


def save_case(out_dir, kind, booster, X, num_outputs, objective, extra=None):
    d = os.path.join(out_dir, "xgb%s_%s" % (VERSION, kind))
    os.makedirs(d, exist_ok=True)
    booster.save_model(os.path.join(d, "model.json"))
    files = ["model.json"]
    if MAJOR_MINOR >= (1, 6):
        booster.save_model(os.path.join(d, "model.ubj"))
        files.append("model.ubj")
    # Reference outputs from the model reloaded from the file, as the corpus does.
    try:
        reloaded = xgb.Booster(model_file=os.path.join(d, "model.json"))
    except xgb.core.XGBoostError:
        # XGBoost 1.0 cannot reload its own JSON when pruning left deleted nodes (it does not save
        # num_deleted); its in-memory model is the reference then.
        reloaded = booster
    dm = xgb.DMatrix(X, missing=np.nan)
    margin = reloaded.predict(dm, output_margin=True).reshape(X.shape[0], -1)
    leaf = reloaded.predict(dm, pred_leaf=True).reshape(X.shape[0], -1).astype(np.int64)
    write_csv(os.path.join(d, "X.csv"), X.astype(np.float64), "%.9g")
    write_csv(os.path.join(d, "margin.csv"), margin.astype(np.float64), "%.9g")
    write_csv(os.path.join(d, "leaf.csv"), leaf, "%d")
    meta = {"case": os.path.basename(d), "library": "xgboost", "library_version": VERSION,
            "objective": objective, "num_features": X.shape[1], "num_outputs": num_outputs,
            "model_files": files, "n_rows": X.shape[0]}
    meta.update(extra or {})
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    rng = np.random.RandomState(7)
    n, F = 300, 5
    X = rng.randn(n, F).astype(np.float32)
    X[rng.rand(n, F) < 0.1] = np.nan
    Xt = X[:40].copy()
    # Exercise x == threshold in the reference rows too.
    y_reg = np.nan_to_num(X[:, 0]) * 2 + np.sin(np.nan_to_num(X[:, 1])) + rng.randn(n) * 0.1
    y_bin = (y_reg > 0).astype(np.float32)

    # binary:logistic with the exact method and pruning (1.x default updaters), gamma prunes nodes.
    p = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.5, "gamma": 2.0, "seed": 1,
         "tree_method": "exact", "base_score": 0.4}
    b = xgb.train(p, xgb.DMatrix(X, label=y_bin, missing=np.nan), 4)
    save_case(out_dir, "binary", b, Xt, 1, p["objective"])

    # dart: weight_drop.
    p = {"objective": "reg:squarederror", "booster": "dart", "max_depth": 3, "eta": 0.5,
         "rate_drop": 0.5, "skip_drop": 0.0, "seed": 3}
    b = xgb.train(p, xgb.DMatrix(X, label=y_reg, missing=np.nan), 5)
    save_case(out_dir, "dart", b, Xt, 1, p["objective"])

    # multi:softprob with a random forest per round.
    y_cls = np.digitize(y_reg, [-1.0, 1.0]).astype(np.float32)
    p = {"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "eta": 0.5,
         "num_parallel_tree": 2, "subsample": 0.7, "seed": 1}
    b = xgb.train(p, xgb.DMatrix(X, label=y_cls, missing=np.nan), 2)
    save_case(out_dir, "multiclass_rf", b, Xt, 3, p["objective"])

    # count:poisson: base_score is in prediction space (log link).
    y_cnt = rng.poisson(np.exp(np.clip(y_reg, -2, 2) * 0.5)).astype(np.float32)
    p = {"objective": "count:poisson", "max_depth": 3, "eta": 0.3, "seed": 1}
    b = xgb.train(p, xgb.DMatrix(X, label=y_cnt, missing=np.nan), 3)
    save_case(out_dir, "poisson", b, Xt, 1, p["objective"])

    if MAJOR_MINOR >= (1, 6):
        # Categorical splits: partition (feature 3, 12 categories) and one-hot (feature 4, 3 categories).
        Xc = X.copy()
        Xc[:, 3] = rng.randint(0, 12, n)
        Xc[:, 4] = rng.randint(0, 3, n)
        Xc[rng.rand(n) < 0.05, 3] = np.nan
        y_cat = y_reg + (Xc[:, 3] % 3 == 0) * 2.0 - (Xc[:, 4] == 1) * 1.5
        ft = ["q", "q", "q", "c", "c"]
        p = {"objective": "reg:squarederror", "max_depth": 3, "eta": 0.5, "tree_method": "hist",
             "max_cat_to_onehot": 4, "seed": 1}
        dm = xgb.DMatrix(Xc, label=y_cat, missing=np.nan, feature_types=ft, enable_categorical=True)
        b = xgb.train(p, dm, 4)
        Xct = Xc[:40].copy()
        Xct[0, 3] = 15.0  # unseen category -> left
        Xct[1, 3] = -1.0  # invalid category -> left
        save_case(out_dir, "categorical", b, Xct, 1, p["objective"])

    if MAJOR_MINOR >= (2, 0):
        Y = np.stack([y_reg, -y_reg * 0.5, np.nan_to_num(X[:, 2])], axis=1)
        p = {"tree_method": "hist", "multi_strategy": "multi_output_tree", "max_depth": 3,
             "eta": 0.5, "seed": 1}
        b = xgb.train(p, xgb.DMatrix(X, label=Y, missing=np.nan), 3)
        save_case(out_dir, "multi_output_tree", b, Xt, 3, "reg:squarederror")


if __name__ == "__main__":
    main()

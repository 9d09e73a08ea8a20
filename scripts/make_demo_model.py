#!/usr/bin/env python3
"""Builds the bundled demo model of README's main command.

Writes examples/models/demo/1/model.json (a small XGBoost binary classifier: 8 numeric features,
40 trees of depth 4, trained on a seeded synthetic data set made with numpy), its background data
set examples/models/demo/background.csv (the first 100 training rows: what interventional SHAP
takes expectations over) and examples/rows.csv (16 input rows in grove's CSV format: no header,
%.9g, `nan` for missing values).

    python3 scripts/make_demo_model.py          # from the repository root

Needs numpy and xgboost. The output is deterministic for a given XGBoost version.
"""
import os

import numpy as np
import xgboost as xgb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FEATURES = 8


def synthetic(rng, n):
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    logit = (1.5 * x[:, 0] - 2.0 * x[:, 1] * (x[:, 2] > 0) + 0.8 * x[:, 3] ** 2
             - 0.5 * x[:, 4] + 0.3 * rng.normal(size=n))
    y = (logit > 0.5).astype(np.float32)
    # About 5% missing values, so that default directions matter.
    x[rng.random(size=x.shape) < 0.05] = np.nan
    return np.round(x, 4), y


def main():
    rng = np.random.default_rng(20261122)
    x, y = synthetic(rng, 4000)
    names = [f"f{i}" for i in range(FEATURES)]
    dtrain = xgb.DMatrix(x, label=y, feature_names=names)
    params = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.3, "seed": 1,
              "nthread": 1, "tree_method": "hist"}
    booster = xgb.train(params, dtrain, num_boost_round=40)
    out_dir = os.path.join(ROOT, "examples", "models", "demo", "1")
    os.makedirs(out_dir, exist_ok=True)
    booster.save_model(os.path.join(out_dir, "model.json"))
    write_csv(os.path.join(ROOT, "examples", "models", "demo", "background.csv"), x[:100])
    rows, _ = synthetic(rng, 16)
    write_csv(os.path.join(ROOT, "examples", "rows.csv"), rows)
    print("wrote", out_dir, "its background.csv and examples/rows.csv")


def write_csv(path, rows):
    with open(path, "w") as f:
        for row in rows:
            f.write(",".join("nan" if np.isnan(v) else "%.9g" % v for v in row) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Makes the production-shape forests of the nvForest comparison (docs/benchmarks/prediction-gpu.md,
"Prediction against nvForest"): wide rows, missing values, many classes, deep leaf-wise LightGBM
trees.

  python3 bench/common/make_production_models.py OUT_DIR [--rows N] [--only NAME,...]

writes OUT_DIR/NAME.{ubj|txt} (the model) and OUT_DIR/NAME.csv (2,000 rows of its features, no
header, missing values written `nan`) for:

  prod-wide256      XGBoost binary, 256 features, depth 8, 600 trees
  prod-wide1024     XGBoost regression, 1024 features, depth 6, 1000 trees, 20% missing values
  prod-lgb5         LightGBM 5-class, 100 features, num_leaves 127, 300 rounds (1500 trees)
  prod-class10      XGBoost 10-class, 64 features, depth 10, 200 rounds (2000 trees)
  prod-lgb-binary   LightGBM binary, 50 features, num_leaves 255, 1000 rounds
  prod-lgb-cat      LightGBM binary, 60 features of which 12 categorical (8 to 64 categories),
                    num_leaves 127, 400 rounds

The target mixes many features (sums of pairwise products and thresholds over a random subset), so
the trees grow to their full depth / leaf count instead of stopping early on a simple signal. Seeded:
the same library versions give the same models.
"""
import argparse
import os

import numpy as np

# name: (library, features, rounds, depth or num_leaves, classes, missing fraction[, categorical
# features: the first ones, integer codes with an effect of their own per category])
SPECS = {
    "prod-wide256": ("xgboost", 256, 600, 8, 2, 0.02),
    "prod-wide1024": ("xgboost", 1024, 1000, 6, 0, 0.20),
    "prod-lgb5": ("lightgbm", 100, 300, 127, 5, 0.05),
    "prod-class10": ("xgboost", 64, 200, 10, 10, 0.02),
    "prod-lgb-binary": ("lightgbm", 50, 1000, 255, 2, 0.05),
    "prod-lgb-cat": ("lightgbm", 60, 400, 127, 2, 0.05, 12),
}


def make_rows(rng, n, features, missing):
    x = rng.normal(size=(n, features)).astype(np.float32)
    x[rng.random(size=x.shape) < missing] = np.nan
    return x


def make_target(x, classes, rng):
    z = np.nan_to_num(x)
    f = z.shape[1]
    k = min(f, 48)
    idx = rng.choice(f, size=k, replace=False)
    y = np.zeros(len(z))
    for j in range(0, k - 1, 2):
        a, b = z[:, idx[j]], z[:, idx[j + 1]]
        y += np.sin(a * (1 + j % 3)) * b + (a > 0.5 * (j % 4 - 1.5)) * 0.7
    y += rng.normal(scale=0.3, size=len(y))
    if classes:
        edges = np.quantile(y, np.linspace(0, 1, classes + 1)[1:-1])
        return np.digitize(y, edges)
    return y


def add_categories(rng, x, cats):
    """Turns the first `cats` columns into category codes (missing values kept) and returns the
    target's part from them: an effect per category."""
    effect = np.zeros(len(x))
    for j in range(cats):
        k = int(rng.integers(8, 65))
        missing = np.isnan(x[:, j])
        codes = rng.integers(0, k, size=len(x))
        effect += rng.normal(size=k)[codes] * np.where(missing, 0.0, 1.0)
        x[:, j] = np.where(missing, np.nan, codes).astype(np.float32)
    return effect


def train(name, spec, rows, out):
    lib, features, rounds, size, classes, missing = spec[:6]
    cats = spec[6] if len(spec) > 6 else 0
    rng = np.random.default_rng(sum(map(ord, name)))  # stable across runs, unlike hash()
    x = make_rows(rng, rows, features, missing)
    effect = add_categories(rng, x, cats)
    y = make_target(x[:, cats:], 0, rng) + effect
    if classes:
        edges = np.quantile(y, np.linspace(0, 1, classes + 1)[1:-1])
        y = np.digitize(y, edges)
    if lib == "xgboost":
        import xgboost as xgb

        params = {"max_depth": size, "eta": 0.05, "tree_method": "hist", "seed": 7,
                  "nthread": os.cpu_count(), "min_child_weight": 0.5, "lambda": 1.0}
        if classes > 2:
            params.update(objective="multi:softprob", num_class=classes)
        elif classes == 2:
            params.update(objective="binary:logistic")
        else:
            params.update(objective="reg:squarederror")
        booster = xgb.train(params, xgb.DMatrix(x, label=y), rounds)
        path = os.path.join(out, name + ".ubj")
        booster.save_model(path)
    else:
        import lightgbm as lgb

        params = {"num_leaves": size, "learning_rate": 0.05, "min_data_in_leaf": 5,
                  "max_depth": -1, "seed": 7, "verbose": -1, "num_threads": os.cpu_count(),
                  "deterministic": True, "force_row_wise": True}
        if classes > 2:
            params.update(objective="multiclass", num_class=classes)
        else:
            params.update(objective="binary")
        data = lgb.Dataset(x, label=y, categorical_feature=list(range(cats)) or "auto")
        booster = lgb.train(params, data, rounds)
        path = os.path.join(out, name + ".txt")
        booster.save_model(path)
    np.savetxt(os.path.join(out, name + ".csv"), x[:2000], fmt="%.9g", delimiter=",")
    print(f"{name}: {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--rows", type=int, default=30000, help="training rows")
    ap.add_argument("--only", default="", help="comma-separated model names")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    names = a.only.split(",") if a.only else list(SPECS)
    for name in names:
        train(name, SPECS[name], a.rows, a.out)


if __name__ == "__main__":
    main()

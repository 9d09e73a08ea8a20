#!/usr/bin/env python3
"""Makes the production-shape forests of the nvForest comparison (docs/benchmarks/prediction-gpu.md,
"Prediction against nvForest"): wide rows, missing values, many classes, deep leaf-wise LightGBM
trees, categorical columns (LightGBM and XGBoost, one-hot and partition splits), many shallow trees
and random forests.

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
  prod-lgb-cat-reg  LightGBM regression, 40 features of which 10 categorical (two of 3 categories:
                    one-hot splits under max_cat_to_onehot 4; the others 3 to 60: partitions),
                    num_leaves 63, 1000 rounds
  prod-lgb-hicat    LightGBM binary, 40 features of which 8 categorical of 150 to 600 categories
                    (high-cardinality columns: split sets list categories in the hundreds),
                    num_leaves 63, 500 rounds, min_data_per_group 5, cat_smooth 1
  prod-xgb-cat      XGBoost regression with enable_categorical, 40 features of which 10 categorical
                    (two of 3 categories: one-hot splits; the others 3 to 60: partitions), depth 8,
                    500 rounds
  prod-shallow      XGBoost binary, 500 features, depth 4, 3000 rounds (many shallow trees)
  prod-class100     XGBoost 100-class, 32 features, depth 6, 20 rounds (2000 trees)
  prod-rf           XGBoost random forest regression, 64 features, 500 trees of depth 10 in one
                    round (num_parallel_tree, rows and columns subsampled)
  prod-lgb-rf       LightGBM random forest (boosting rf), binary, 64 features, num_leaves 255,
                    300 trees
  prod-xgb-deep     XGBoost regression, 100 features, depth 14, 90 rounds, 5% missing values
                    (nearly full deep trees: most rows end at depth 14)
  prod-lgb-deep     LightGBM binary, 80 features, num_leaves 1023, 200 rounds, 5% missing values
                    (leaf-wise trees of depth 20 and more)
  prod-small        XGBoost binary, 20 features, depth 6, 50 rounds, no missing values
  prod-xgb-cat5     XGBoost 5-class with enable_categorical, 30 features of which 6 categorical
                    (one of 3 categories, the others 3 to 30), depth 6, 100 rounds

The target mixes many features (sums of pairwise products and thresholds over a random subset), so
the trees grow to their full depth / leaf count instead of stopping early on a simple signal.
Categorical columns come first, integer codes (missing values kept) with an effect of their own per
category. Seeded (the rows by the model's name, the libraries by a fixed seed, LightGBM
deterministic): the same library versions give the same models.
"""
import argparse
import os

import numpy as np

# name: (library, features, rounds, depth or num_leaves, classes (0: regression), missing fraction,
# categorical features (the first ones), their category counts (low, high[, columns of exactly 3
# categories first: one-hot splits under max_cat_to_onehot 4]), trees per round: a
# random forest when > 1 (XGBoost num_parallel_tree; LightGBM boosting rf, one tree per round),
# the library's further parameters)
SPECS = {
    "prod-wide256": ("xgboost", 256, 600, 8, 2, 0.02),
    "prod-wide1024": ("xgboost", 1024, 1000, 6, 0, 0.20),
    "prod-lgb5": ("lightgbm", 100, 300, 127, 5, 0.05),
    "prod-class10": ("xgboost", 64, 200, 10, 10, 0.02),
    "prod-lgb-binary": ("lightgbm", 50, 1000, 255, 2, 0.05),
    "prod-lgb-cat": ("lightgbm", 60, 400, 127, 2, 0.05, 12, (8, 64)),
    "prod-lgb-cat-reg": ("lightgbm", 40, 1000, 63, 0, 0.05, 10, (3, 60, 2)),
    # Categories of a few rows each still form split groups (LightGBM's default
    # min_data_per_group 100 would merge most of them away).
    "prod-lgb-hicat": ("lightgbm", 40, 500, 63, 2, 0.05, 8, (150, 600), 1,
                       {"min_data_per_group": 5, "cat_smooth": 1.0}),
    "prod-xgb-cat": ("xgboost", 40, 500, 8, 0, 0.05, 10, (3, 60, 2)),
    "prod-shallow": ("xgboost", 500, 3000, 4, 2, 0.02),
    "prod-class100": ("xgboost", 32, 20, 6, 100, 0.02),
    "prod-rf": ("xgboost", 64, 1, 10, 0, 0.02, 0, None, 500),
    "prod-lgb-rf": ("lightgbm", 64, 300, 255, 2, 0.02, 0, None, 2),
    "prod-xgb-deep": ("xgboost", 100, 90, 14, 0, 0.05),
    "prod-lgb-deep": ("lightgbm", 80, 200, 1023, 2, 0.05),
    "prod-small": ("xgboost", 20, 50, 6, 2, 0.0),
    "prod-xgb-cat5": ("xgboost", 30, 100, 6, 5, 0.05, 6, (3, 30, 1)),
}


def make_rows(rng, n, features, missing):
    x = rng.normal(size=(n, features)).astype(np.float32)
    x[rng.random(size=x.shape) < missing] = np.nan
    return x


def make_target(x, rng):
    z = np.nan_to_num(x)
    f = z.shape[1]
    k = min(f, 48)
    idx = rng.choice(f, size=k, replace=False)
    y = np.zeros(len(z))
    for j in range(0, k - 1, 2):
        a, b = z[:, idx[j]], z[:, idx[j + 1]]
        y += np.sin(a * (1 + j % 3)) * b + (a > 0.5 * (j % 4 - 1.5)) * 0.7
    y += rng.normal(scale=0.3, size=len(y))
    return y


# Each library's objective for more than two classes, for two and for regression.
OBJECTIVES = {"xgboost": ("multi:softprob", "binary:logistic", "reg:squarederror"),
              "lightgbm": ("multiclass", "binary", "regression")}


def objective(lib, classes):
    """The parameters that make `lib` fit `classes` classes (0: regression)."""
    multi, binary, regression = OBJECTIVES[lib]
    if classes > 2:
        return {"objective": multi, "num_class": classes}
    return {"objective": binary if classes == 2 else regression}


def add_categories(rng, x, cats, levels):
    """Turns the first `cats` columns into category codes (missing values kept), each with a count
    of categories in `levels` (low, high[, leading columns of 3]), and returns the target's part
    from them: an effect per category."""
    effect = np.zeros(len(x))
    three = levels[2] if len(levels) > 2 else 0
    for j in range(cats):
        k = 3 if j < three else int(rng.integers(levels[0], levels[1] + 1))
        missing = np.isnan(x[:, j])
        codes = rng.integers(0, k, size=len(x))
        effect += rng.normal(size=k)[codes] * np.where(missing, 0.0, 1.0)
        x[:, j] = np.where(missing, np.nan, codes).astype(np.float32)
    return effect


def train(name, spec, rows, out):
    lib, features, rounds, size, classes, missing = spec[:6]
    cats = spec[6] if len(spec) > 6 else 0
    levels = spec[7] if len(spec) > 7 else None
    forest = spec[8] if len(spec) > 8 else 1
    extra = spec[9] if len(spec) > 9 else {}
    rng = np.random.default_rng(sum(map(ord, name)))  # stable across runs, unlike hash()
    x = make_rows(rng, rows, features, missing)
    effect = add_categories(rng, x, cats, levels) if cats else np.zeros(len(x))
    y = make_target(x[:, cats:], rng) + effect
    if classes:
        edges = np.quantile(y, np.linspace(0, 1, classes + 1)[1:-1])
        y = np.digitize(y, edges)
    if lib == "xgboost":
        import xgboost as xgb

        params = {"max_depth": size, "eta": 0.05, "tree_method": "hist", "seed": 7,
                  "nthread": os.cpu_count(), "min_child_weight": 0.5, "lambda": 1.0}
        params.update(objective(lib, classes))
        if forest > 1:  # a random forest: one round of bagged trees, no shrinkage
            params.update(num_parallel_tree=forest, eta=1.0, subsample=0.63,
                          colsample_bynode=0.6)
        params.update(extra)
        if cats:
            params.update(max_cat_to_onehot=4)
            types = ["c"] * cats + ["q"] * (features - cats)
            data = xgb.DMatrix(x, label=y, feature_types=types, enable_categorical=True)
        else:
            data = xgb.DMatrix(x, label=y)
        booster = xgb.train(params, data, rounds)
        path = os.path.join(out, name + ".ubj")
        booster.save_model(path)
    else:
        import lightgbm as lgb

        params = {"num_leaves": size, "learning_rate": 0.05, "min_data_in_leaf": 5,
                  "max_depth": -1, "seed": 7, "verbose": -1, "num_threads": os.cpu_count(),
                  "deterministic": True, "force_row_wise": True}
        params.update(objective(lib, classes))
        if forest > 1:  # a random forest: bagged rows and columns, trees averaged
            params.update(boosting="rf", bagging_fraction=0.63, bagging_freq=1,
                          feature_fraction=0.6)
        if cats:
            params.update(max_cat_to_onehot=4)
        params.update(extra)
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

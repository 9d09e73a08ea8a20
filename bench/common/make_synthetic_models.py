#!/usr/bin/env python3
"""Makes the synthetic XGBoost forests of the selector study (docs/benchmarks/archive.md,
"Selector study").

  python3 bench/common/make_synthetic_models.py OUT_DIR

writes OUT_DIR/syn-NAME.ubj (the model) and OUT_DIR/syn-NAME.csv (2,000 rows of its features, no
header, 5% missing values written `nan`) for:

  syn-shallow     200 trees, depth 4, 20 features    (the whole forest fits shared memory)
  syn-deep        50 trees, depth 12, 20 features
  syn-multiclass  8 classes x 40 rounds, depth 6, 20 features
  syn-wide        100 trees, depth 6, 400 features  (rows too wide to stage in shared memory)

Seeded: the same XGBoost version gives the same models.
"""
import os
import sys

import numpy as np
import xgboost as xgb

SPECS = {
    # name: (features, rounds, depth, classes)
    "syn-shallow": (20, 200, 4, 0),
    "syn-deep": (20, 50, 12, 0),
    "syn-multiclass": (20, 40, 6, 8),
    "syn-wide": (400, 100, 6, 0),
}


def rows(rng, n, features):
    x = rng.normal(size=(n, features)).astype(np.float32)
    x[rng.random(size=x.shape) < 0.05] = np.nan
    return x


def target(x, classes, rng):
    z = np.nan_to_num(x)
    k = min(8, z.shape[1])
    y = np.sin(z[:, 0] * 2) + z[:, 1] * z[:, 2] + np.abs(z[:, :k]).sum(axis=1) * 0.3
    y += rng.normal(scale=0.1, size=len(y))
    if classes:
        edges = np.quantile(y, np.linspace(0, 1, classes + 1)[1:-1])
        return np.digitize(y, edges)
    return y


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for i, (name, (features, rounds, depth, classes)) in enumerate(SPECS.items()):
        rng = np.random.default_rng(1000 + i)
        x = rows(rng, 20000, features)
        params = {"max_depth": depth, "eta": 0.1, "tree_method": "hist", "seed": i, "nthread": 2}
        if classes:
            params.update(objective="multi:softprob", num_class=classes)
        else:
            params.update(objective="reg:squarederror")
        booster = xgb.train(params, xgb.DMatrix(x, label=target(x, classes, rng)), rounds)
        booster.save_model(os.path.join(out, name + ".ubj"))
        np.savetxt(os.path.join(out, name + ".csv"), rows(rng, 2000, features), fmt="%.9g",
                   delimiter=",")
        print(f"{name}: {booster.num_boosted_rounds()} rounds, {features} features")


if __name__ == "__main__":
    main()

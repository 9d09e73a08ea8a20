"""Writes the fixtures of the category tests (tests/model/categories_test.cc): models trained on a
pandas DataFrame with categorical columns, so that their files record the categories.

  xgb.json / xgb.ubj  XGBoost 3.1+ (learner...model.cats.enc): "city" (strings, with a non-ASCII
                      one), "size" (integers), the numeric column "x" between them
  lgb.txt             LightGBM (pandas_categorical with [categorical_feature: ...])

Run with XGBoost >= 3.1 and LightGBM 4: python3 make_categories.py (writes beside itself).
"""
import os

import lightgbm as lgb
import numpy as np
import pandas as pd
import xgboost as xgb

here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(7)
n = 400
df = pd.DataFrame({
    "city": pd.Categorical(rng.choice(["paris", "brest", "lyon", "orl\u00e9ans"], n),
                           categories=["paris", "brest", "lyon", "orl\u00e9ans"]),
    "x": rng.normal(size=n),
    "size": pd.Categorical(rng.choice([3, 10, 42], n), categories=[3, 10, 42]),
})
y = (df["city"].cat.codes.to_numpy() % 2) + df["x"].to_numpy() + (df["size"].cat.codes.to_numpy() == 1)
booster = xgb.train({"tree_method": "hist", "max_depth": 3, "max_cat_to_onehot": 1},
                    xgb.DMatrix(df, y, enable_categorical=True), num_boost_round=3)
booster.save_model(os.path.join(here, "xgb.json"))
booster.save_model(os.path.join(here, "xgb.ubj"))
model = lgb.LGBMRegressor(n_estimators=3, num_leaves=4, min_child_samples=5, verbose=-1)
model.fit(df, y)
model.booster_.save_model(os.path.join(here, "lgb.txt"))

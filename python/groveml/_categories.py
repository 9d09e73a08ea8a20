"""The category values a model was trained with, read from its file, so that a pandas categorical
column is given to the engines as the codes the model's trees test (XGBoost and LightGBM recode a
DataFrame's categories the same way before predicting).

 * XGBoost JSON and UBJSON (3.1 and later): learner.gradient_booster[.gbtree].model.cats.enc, per
   feature either strings (UTF-8 bytes in `values`, cut at `offsets`) or numbers (`values`); UBJSON
   through _ubjson.py.
 * LightGBM text: the closing `pandas_categorical:` line (one list per categorical column, in
   column order) with the `[categorical_feature: ...]` parameter naming those columns.

Other files (models trained without a DataFrame, older XGBoost versions) give no categories: a
categorical column then gives its own category codes, as older XGBoost versions took them.
"""

import json
from typing import Dict, List, Sequence

import numpy as np

from . import _ubjson


def categories_from_bytes(data: bytes, fmt: str, feature_names, feature_types) -> Dict[str, list]:
    """{feature name: categories in code order} for the model file's bytes (`fmt` as Model.format
    names it: xgboost-json, xgboost-ubjson, lightgbm-text)."""
    if fmt == "xgboost-json":
        return xgboost_categories(json.loads(data), feature_names) if "c" in feature_types else {}
    if fmt == "xgboost-ubjson":
        if "c" not in feature_types:
            return {}
        return xgboost_categories(_ubjson.loads(data), feature_names)
    if fmt == "lightgbm-text":
        return lightgbm_categories(data[-(1 << 20):].decode("utf-8", "replace"), feature_names)
    return {}


def xgboost_categories(doc, feature_names) -> Dict[str, list]:
    try:
        booster = doc["learner"]["gradient_booster"]
        model = booster["gbtree"]["model"] if "gbtree" in booster else booster["model"]
        enc = model["cats"]["enc"]
    except (KeyError, TypeError):
        return {}
    out = {}
    if not isinstance(enc, list):
        return {}
    for name, e in zip(feature_names, enc):
        if not isinstance(e, dict):
            continue
        # Lists from JSON, numpy arrays from UBJSON's typed arrays.
        values = [int(v) if isinstance(v, (int, np.integer)) else float(v)
                  for v in (e.get("values") if e.get("values") is not None else [])]
        offsets = [int(v) for v in (e.get("offsets") if e.get("offsets") is not None else [])]
        if not values:
            continue
        if offsets:
            raw = bytes(int(v) & 0xFF for v in values)
            out[name] = [raw[offsets[i]:offsets[i + 1]].decode("utf-8", "replace")
                         for i in range(len(offsets) - 1)]
        else:
            out[name] = values
    return out


def lightgbm_categories(tail: str, feature_names) -> Dict[str, list]:
    lists = None
    columns: List[int] = []
    for line in tail.splitlines():
        if line.startswith("pandas_categorical:"):
            value = line[len("pandas_categorical:"):].strip()
            lists = json.loads(value) if value and value != "null" else None
        elif line.startswith("[categorical_feature:"):
            text = line[len("[categorical_feature:"):].rstrip("]").strip()
            try:
                columns = [int(c) for c in text.split(",") if c.strip()]
            except ValueError:
                columns = []  # named columns: the mapping below cannot be told, so none is made
    if not lists or len(lists) != len(columns):
        return {}
    return {feature_names[c]: list(v) for c, v in zip(columns, lists) if 0 <= c < len(feature_names)}

#!/usr/bin/env python3
"""Generates Grove's in-repo golden corpus (tests/golden/) with the installed XGBoost, LightGBM and CatBoost.

Small cases in the layout of /work/shared/testdata (see its README.md): model.json + model.ubj
(XGBoost) or model.txt (LightGBM), X.csv, margin.csv, pred.csv, contribs.csv, interactions.csv
(XGBoost), leaf.csv, margin_range.csv (an iteration range), meta.json; CatBoost cases hold
catboost.json (save_model(format="json")) and contribs.csv from CatBoost's own ShapValues. Every reference output is
computed by the library from the model reloaded from the saved file; nothing comes from Grove.

Inputs are float32 values written in the shortest form that parses back to exactly the float64
value given to the library (mostly multiples of 1/256): Grove serves float32 rows, so these cases check
it exactly for both libraries, including cells equal to split thresholds (XGBoost: the float32
threshold; LightGBM: the floats just below/above its float64 threshold).

Also writes tests/golden/refused/: models the libraries serve but Grove refuses (gblinear; CatBoost
CTR categorical splits).

Also writes the tl_* cases: Treelite checkpoints (scripts/make_treelite_corpus.py).

Usage: python3 scripts/make_golden_corpus.py [--out tests/golden]
"""
import argparse
import json
import os
import re
import shutil
import sys

import numpy as np

import catboost as cb
import lightgbm as lgb
import xgboost as xgb

SEED = 20240601
N_ROWS = 100
N_INTERACTION_ROWS = 20


def fmt(v):
    if np.isnan(v):
        return "nan"
    return "%.9g" % v


def fmt_exact(v):
    """Shortest text that parses back to exactly this float64."""
    if np.isnan(v):
        return "nan"
    return repr(float(v))


def write_csv(path, m, exact=False):
    m = np.asarray(m, dtype=np.float64)
    if m.ndim == 1:
        m = m.reshape(-1, 1)
    f_ = fmt_exact if exact else fmt
    with open(path, "w") as f:
        for row in m:
            f.write(",".join(f_(v) for v in row) + "\n")


def as_f32_text_exact(X):
    """float32 values; their X.csv text parses back to exactly the float64 given to the library."""
    X = np.asarray(X, dtype=np.float32).astype(np.float64)
    back = np.array([[float(fmt_exact(v)) for v in row] for row in X])
    same = (back == X) | (np.isnan(back) & np.isnan(X))
    assert same.all(), "X does not round-trip"
    return X


def rel_err(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))


def synth(rng, n, f, nan_frac=0.0):
    X = np.round(rng.normal(size=(n, f)) * 256) / 256  # float32-exact, short decimals
    if nan_frac > 0:
        X[rng.random(size=X.shape) < nan_frac] = np.nan
    return X


# ------------------------------------------------------------------------------------------------
# XGBoost


def xgb_thresholds(booster):
    """feature -> sorted float32 split thresholds of numeric splits."""
    model = json.loads(booster.save_raw("json"))
    gb = model["learner"]["gradient_booster"]
    trees = gb["model"]["trees"] if "model" in gb else gb["gbtree"]["model"]["trees"]
    out = {}
    for t in trees:
        types = t.get("split_type", [0] * len(t["left_children"]))
        for i, left in enumerate(t["left_children"]):
            if left == -1 or types[i] == 1:
                continue
            out.setdefault(t["split_indices"][i], set()).add(np.float32(t["split_conditions"][i]))
    return {k: sorted(v) for k, v in out.items()}


def xgb_num_leaves(model):
    gb = model["learner"]["gradient_booster"]
    trees = gb["model"]["trees"] if "model" in gb else gb["gbtree"]["model"]["trees"]
    return int(sum(sum(1 for c in t["left_children"] if c == -1) for t in trees))


def put_thresholds(rng, X, thresholds, frac, skip_cols=()):
    """Overwrites about `frac` of the numeric cells with split thresholds (exercises x == t)."""
    n = 0
    for (r, c), _ in np.ndenumerate(X):
        if c in skip_cols or c not in thresholds or rng.random() >= frac:
            continue
        X[r, c] = thresholds[c][rng.integers(len(thresholds[c]))]
        n += 1
    return n


def xgb_case(out_root, name, description, params, rounds, X_train, y_train, X_test,
             cat_cols=(), n_classes=1, range_=(1, 3), put_equal=True, rng=None):
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    # Numeric arrays with feature_types "c": category values are used as they are (no pandas
    # re-coding), so unseen / negative / fractional values reach the trees unchanged, as in Grove.
    ftypes = ["c" if i in cat_cols else "q" for i in range(X_train.shape[1])] if cat_cols else None

    def dmatrix(X, label=None):
        return xgb.DMatrix(X, label=label, feature_types=ftypes, enable_categorical=bool(cat_cols))

    dtrain = dmatrix(X_train, y_train)
    booster = xgb.train(params, dtrain, num_boost_round=rounds)
    n_eq = 0
    if put_equal:
        n_eq = put_thresholds(rng, X_test, xgb_thresholds(booster), 0.03, skip_cols=cat_cols)
    X_test = as_f32_text_exact(X_test)
    booster.save_model(os.path.join(d, "model.json"))
    booster.save_model(os.path.join(d, "model.ubj"))
    bst = xgb.Booster(model_file=os.path.join(d, "model.json"))
    bst_ubj = xgb.Booster(model_file=os.path.join(d, "model.ubj"))
    dtest = dmatrix(X_test)

    n, F = X_test.shape
    margin = bst.predict(dtest, output_margin=True).reshape(n, -1)
    K = margin.shape[1]
    pred = bst.predict(dtest).reshape(n, -1)
    leaf = bst.predict(dtest, pred_leaf=True).reshape(n, -1)
    contribs = bst.predict(dtest, pred_contribs=True).reshape(n, -1)
    ni = min(N_INTERACTION_ROWS, n)
    dtest_i = dmatrix(X_test[:ni])
    inter = bst.predict(dtest_i, pred_interactions=True).reshape(ni, -1)
    b, e = range_
    margin_range = bst.predict(dtest, output_margin=True, iteration_range=(b, e)).reshape(n, -1)
    ubj_err = rel_err(bst_ubj.predict(dtest, output_margin=True).reshape(n, -1), margin)

    write_csv(os.path.join(d, "X.csv"), X_test, exact=True)
    write_csv(os.path.join(d, "margin.csv"), margin)
    write_csv(os.path.join(d, "pred.csv"), pred)
    write_csv(os.path.join(d, "leaf.csv"), leaf)
    write_csv(os.path.join(d, "contribs.csv"), contribs)
    write_csv(os.path.join(d, "interactions.csv"), inter)
    write_csv(os.path.join(d, "margin_range.csv"), margin_range)

    cblock = contribs.reshape(n, K, F + 1)
    iblock = inter.reshape(ni, K, F + 1, F + 1)
    model = json.loads(open(os.path.join(d, "model.json")).read())
    meta = {
        "case": name,
        "library": "xgboost",
        "library_version": xgb.__version__,
        "description": description,
        "data_source": "numpy synthetic (seed %d)" % SEED,
        "objective": params["objective"],
        "booster": params.get("booster", "gbtree"),
        "params": params,
        "num_boost_round": rounds,
        "num_features": F,
        "num_outputs": K,
        "num_trees": int(leaf.shape[1]),
        "num_leaves_total": xgb_num_leaves(model),
        "categorical_features": list(cat_cols),
        "base_score_serialized": model["learner"]["learner_model_param"]["base_score"],
        "gradient_booster_name_in_json": model["learner"]["gradient_booster"]["name"],
        "n_rows": n,
        "n_interaction_rows": ni,
        "n_test_values_equal_to_a_threshold": n_eq,
        "model_files": ["model.json", "model.ubj"],
        "outputs": {
            "margin": {"file": "margin.csv", "shape": list(margin.shape)},
            "pred": {"file": "pred.csv", "shape": list(pred.shape)},
            "contribs": {"file": "contribs.csv", "shape": list(contribs.shape),
                         "layout": "row-major [row][output][feature 0..F-1, bias]"},
            "interactions": {"file": "interactions.csv", "shape": list(inter.shape),
                             "rows": "first %d rows of X.csv" % ni,
                             "layout": "row-major [row][output][i 0..F][j 0..F], index F = bias"},
            "leaf": {"file": "leaf.csv", "shape": list(leaf.shape)},
            "margin_range": {"file": "margin_range.csv", "shape": list(margin_range.shape),
                             "iteration_begin": b, "iteration_end": e},
        },
        "unsupported": {},
        "not_generated": {},
        "checks": {
            "contribs_sum_vs_margin_max_rel_err": rel_err(cblock.sum(axis=2), margin),
            "interactions_sum_vs_margin_max_rel_err": rel_err(iblock.sum(axis=(2, 3)), margin[:ni]),
            "interactions_rowsum_vs_contribs_max_rel_err":
                rel_err(iblock.sum(axis=3), cblock[:ni]),
            "reload_ubj_vs_json_max_rel_err": ubj_err,
        },
    }
    assert meta["checks"]["contribs_sum_vs_margin_max_rel_err"] < 1e-4, meta["checks"]
    assert ubj_err == 0.0, ubj_err
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


# ------------------------------------------------------------------------------------------------
# LightGBM


def lgb_thresholds(booster):
    out = {}
    for t in booster.dump_model()["tree_info"]:
        stack = [t["tree_structure"]]
        while stack:
            node = stack.pop()
            if "split_feature" not in node:
                continue
            if node["decision_type"] == "<=":
                out.setdefault(node["split_feature"], set()).add(float(node["threshold"]))
            stack += [node["left_child"], node["right_child"]]
    return {k: sorted(v) for k, v in out.items()}


def put_lgb_thresholds(rng, X, thresholds, frac, skip_cols=()):
    """Cells set to the floats just below / at-or-above a float64 threshold t (x <= t boundary)."""
    n = 0
    for (r, c), _ in np.ndenumerate(X):
        if c in skip_cols or c not in thresholds or rng.random() >= frac:
            continue
        t = thresholds[c][rng.integers(len(thresholds[c]))]
        if abs(t) > 1e30:
            continue
        f = np.float32(t)
        if float(f) > t:  # f is the float just above t; its neighbour below is <= t
            below, above = np.nextafter(f, np.float32(-np.inf)), f
        else:
            below, above = f, np.nextafter(f, np.float32(np.inf))
        X[r, c] = below if rng.random() < 0.5 else above
        n += 1
    return n


def lgb_case(out_root, name, description, params, rounds, X_train, y_train, X_test,
             cat_cols=(), range_=(1, 3), rng=None):
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    params = dict(params, seed=SEED, num_threads=2, verbose=-1, deterministic=True,
                  force_row_wise=True)
    ds = lgb.Dataset(X_train, label=y_train,
                     categorical_feature=list(cat_cols) if cat_cols else "auto",
                     free_raw_data=False)
    booster = lgb.train(params, ds, num_boost_round=rounds)
    n_eq = put_lgb_thresholds(rng, X_test, lgb_thresholds(booster), 0.03, skip_cols=cat_cols)
    X_test = as_f32_text_exact(X_test)
    path = os.path.join(d, "model.txt")
    booster.save_model(path)
    bst = lgb.Booster(model_file=path)

    n, F = X_test.shape
    margin = np.asarray(bst.predict(X_test, raw_score=True)).reshape(n, -1)
    K = margin.shape[1]
    pred = np.asarray(bst.predict(X_test)).reshape(n, -1)
    leaf = np.asarray(bst.predict(X_test, pred_leaf=True)).reshape(n, -1)
    b, e = range_
    margin_range = np.asarray(
        bst.predict(X_test, raw_score=True, start_iteration=b, num_iteration=e - b)).reshape(n, -1)
    unsupported = {"interactions": "LightGBM has no SHAP interaction-value API (only pred_contrib)"}
    contribs = None
    try:
        contribs = np.asarray(bst.predict(X_test, pred_contrib=True)).reshape(n, -1)
    except Exception as ex:  # the library refuses (linear trees)
        msg = str(ex).strip().splitlines()[-1]
        unsupported["contribs"] = msg.split("] ", 1)[-1]

    write_csv(os.path.join(d, "X.csv"), X_test, exact=True)
    write_csv(os.path.join(d, "margin.csv"), margin)
    write_csv(os.path.join(d, "pred.csv"), pred)
    write_csv(os.path.join(d, "leaf.csv"), leaf)
    write_csv(os.path.join(d, "margin_range.csv"), margin_range)
    outputs = {
        "margin": {"file": "margin.csv", "shape": list(margin.shape)},
        "pred": {"file": "pred.csv", "shape": list(pred.shape)},
        "leaf": {"file": "leaf.csv", "shape": list(leaf.shape)},
        "margin_range": {"file": "margin_range.csv", "shape": list(margin_range.shape),
                         "iteration_begin": b, "iteration_end": e},
    }
    checks = {"reload_txt_vs_inmemory_max_rel_err":
              rel_err(np.asarray(booster.predict(X_test, raw_score=True)).reshape(n, -1), margin)}
    if contribs is not None:
        write_csv(os.path.join(d, "contribs.csv"), contribs)
        outputs["contribs"] = {"file": "contribs.csv", "shape": list(contribs.shape),
                               "layout": "row-major [row][output][feature 0..F-1, bias]"}
        checks["contribs_sum_vs_margin_max_rel_err"] = rel_err(
            contribs.reshape(n, K, F + 1).sum(axis=2), margin)
        assert checks["contribs_sum_vs_margin_max_rel_err"] < 1e-4, checks
    meta = {
        "case": name,
        "library": "lightgbm",
        "library_version": lgb.__version__,
        "description": description,
        "data_source": "numpy synthetic (seed %d)" % SEED,
        "objective": params["objective"],
        "boosting": params.get("boosting", "gbdt"),
        "params": params,
        "num_boost_round": rounds,
        "num_features": F,
        "num_outputs": K,
        "num_trees": int(leaf.shape[1]),
        "num_leaves_total": int(sum(t["num_leaves"] for t in bst.dump_model()["tree_info"])),
        "categorical_features": list(cat_cols),
        "n_rows": n,
        "n_interaction_rows": 0,
        "n_test_values_next_to_a_threshold": n_eq,
        "model_files": ["model.txt"],
        "outputs": outputs,
        "unsupported": unsupported,
        "not_generated": {},
        "checks": checks,
    }
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


# ------------------------------------------------------------------------------------------------
# CatBoost


def cb_borders(model_json):
    """flat feature -> sorted float32 borders used by the trees' float splits."""
    ff = model_json["features_info"]["float_features"]
    out = {}

    def add(split):
        if split.get("split_type", "FloatFeature") == "FloatFeature":
            f = ff[split["float_feature_index"]]["flat_feature_index"]
            out.setdefault(f, set()).add(np.float32(split["border"]))

    for t in model_json.get("oblivious_trees", []):
        for sp in t["splits"]:
            add(sp)
    for t in model_json.get("trees", []):
        stack = [t]
        while stack:
            node = stack.pop()
            if "split" in node:
                add(node["split"])
                stack += [node["left"], node["right"]]
    return {k: sorted(v) for k, v in out.items()}


_M64 = (1 << 64) - 1
_CITY_K0 = 0xc3a5c85c97cb3127
_CITY_K1 = 0xb492b66fbe98f273
_CITY_K2 = 0x9ae16a3b2f90404f
_CITY_K3 = 0xc949d7c7509e6557


def catboost_category_hash(text):
    """CatBoost's hash of a category's text, as its one-hot splits and features_info's `values`
    hold it (signed int32): CityHash64 v1.0.x of the UTF-8 bytes, low 32 bits. Written from the
    algorithm's description; cb_category_codes checks it against every value of the models it
    trains."""
    s = text.encode("utf-8")
    n = len(s)

    def load64(i):
        return int.from_bytes(s[i:i + 8], "little")

    def load32(i):
        return int.from_bytes(s[i:i + 4], "little")

    def rot(v, r):
        return v if r == 0 else ((v >> r) | (v << (64 - r))) & _M64

    def mix47(v):
        return v ^ (v >> 47)

    def fold(lo, hi):
        mul = 0x9ddfea08eb382d69
        a = ((lo ^ hi) * mul) & _M64
        a ^= a >> 47
        b = ((hi ^ a) * mul) & _M64
        b ^= b >> 47
        return (b * mul) & _M64

    def mix32(i, a, b):
        w, x, y, z = load64(i), load64(i + 8), load64(i + 16), load64(i + 24)
        a = (a + w) & _M64
        b = rot((b + a + z) & _M64, 21)
        c = a
        a = (a + x + y) & _M64
        b = (b + rot(a, 44)) & _M64
        return (a + z) & _M64, (b + c) & _M64

    def quarter(a, z, w1, w2):
        b = rot((a + z) & _M64, 52)
        c = rot(a, 37)
        a = (a + w1) & _M64
        c = (c + rot(a, 7)) & _M64
        a = (a + w2) & _M64
        return (a + z) & _M64, (b + rot(a, 31) + c) & _M64

    if n == 0:
        h = _CITY_K2
    elif n < 4:
        y = s[0] + (s[n >> 1] << 8)
        z = n + (s[n - 1] << 2)
        h = (mix47(((y * _CITY_K2) ^ (z * _CITY_K3)) & _M64) * _CITY_K2) & _M64
    elif n <= 8:
        h = fold((n + (load32(0) << 3)) & _M64, load32(n - 4))
    elif n <= 16:
        tail = load64(n - 8)
        h = fold(load64(0), rot((tail + n) & _M64, n)) ^ tail
    elif n <= 32:
        a = (load64(0) * _CITY_K1) & _M64
        b = load64(8)
        c = (load64(n - 8) * _CITY_K2) & _M64
        d = (load64(n - 16) * _CITY_K0) & _M64
        h = fold((rot((a - b) & _M64, 43) + rot(c, 30) + d) & _M64,
                 (a + rot(b ^ _CITY_K3, 20) - c + n) & _M64)
    elif n <= 64:
        vf, vs = quarter((load64(0) + (n + load64(n - 16)) * _CITY_K0) & _M64, load64(24),
                         load64(8), load64(16))
        wf, ws = quarter((load64(16) + load64(n - 32)) & _M64, load64(n - 8), load64(n - 24),
                         load64(n - 16))
        r = mix47(((vf + ws) * _CITY_K2 + (wf + vs) * _CITY_K0) & _M64)
        h = (mix47((r * _CITY_K0 + vs) & _M64) * _CITY_K2) & _M64
    else:
        x = load64(0)
        y = load64(n - 16) ^ _CITY_K1
        z = load64(n - 56) ^ _CITY_K0
        v = mix32(n - 64, n, y)
        w = mix32(n - 32, (n * _CITY_K1) & _M64, _CITY_K0)
        z = (z + mix47(v[1]) * _CITY_K1) & _M64
        x = (rot((z + x) & _M64, 39) * _CITY_K1) & _M64
        y = (rot(y, 33) * _CITY_K1) & _M64
        p = 0
        for _ in range(((n - 1) & ~63) // 64):
            x = (rot((x + y + v[0] + load64(p + 16)) & _M64, 37) * _CITY_K1) & _M64
            y = (rot((y + v[1] + load64(p + 48)) & _M64, 42) * _CITY_K1) & _M64
            x ^= w[1]
            y ^= v[0]
            z = rot(z ^ w[0], 33)
            v = mix32(p, (v[1] * _CITY_K1) & _M64, (x + w[0]) & _M64)
            w = mix32(p + 32, (z + w[1]) & _M64, y)
            z, x = x, z
            p += 64
        h = fold((fold(v[0], w[0]) + mix47(y) * _CITY_K1 + z) & _M64,
                 (fold(v[1], w[1]) + x) & _M64)
    low = h & 0xffffffff
    return low - (1 << 32) if low >= 1 << 31 else low


# CTR tables file a category under its hash, sign-extended to 64 bits, times this odd
# multiplier squared (mod 2^64); cb_feature_hashes checks it against every key of every table.
_CTR_KEY_FACTOR = (0x4906ba494954cb65 * 0x4906ba494954cb65) & _M64
_CTR_KEY_INVERSE = pow(_CTR_KEY_FACTOR, -1, 1 << 64)
CB_CTR_TYPES = ("Borders", "Buckets", "Counter", "BinarizedTargetMeanValue")


def cb_category_of_ctr_key(key):
    """The category hash (signed int32) whose CTR table key is `key`; None when none has it."""
    v = (key * _CTR_KEY_INVERSE) & _M64
    v = v - (1 << 64) if v >= 1 << 63 else v
    return v if -(1 << 31) <= v < (1 << 31) else None


def cb_values(model_json, col):
    """The categories (hashes) of the categorical feature at column `col` as Grove numbers them
    (core/model/catboost_loader.cc): its one-hot `values`, then the categories of the tables of its
    single-feature CTRs (features_info.ctrs order, each table once, hash_map order), recovered from
    their keys, each hash once."""
    fi = model_json["features_info"]
    cats = fi.get("categorical_features", [])
    index = [i for i, c in enumerate(cats) if c["flat_feature_index"] == col]
    if not index:
        return []
    hashes = list(cats[index[0]].get("values", []))
    seen, tables = set(hashes), set()
    for c in fi.get("ctrs", []):
        if ([e["cat_feature_index"] for e in c["elements"]] != [index[0]] or
                c["ctr_type"] not in CB_CTR_TYPES or c["identifier"] in tables):
            continue
        tables.add(c["identifier"])
        table = model_json["ctr_data"][c["identifier"]]
        for key in table["hash_map"][::table["hash_stride"]]:
            h = cb_category_of_ctr_key(int(key))
            assert h is not None or int(key) == _M64, "a CTR key that is no category's"
            if h is not None and h not in seen:
                seen.add(h)
                hashes.append(h)
    return hashes


def cb_category_codes(model_json, frame_train, frame_test, cat_cols):
    """Grove's codes of the test rows' categories (core/model/category_codes.h): the position of
    the category's hash in the feature's one-hot `values`, len(values) for a hash not there. Checks
    the hash first: every value of the model is the hash of a training category."""
    codes = {}
    for col in cat_cols:
        values = cb_values(model_json, col)
        assert values, "categorical column %d has no categories" % col
        trained = {catboost_category_hash(str(v)) for v in frame_train.iloc[:, col]}
        assert set(values) <= trained, "a one-hot value or CTR key is no training category's"
        position = {h: i for i, h in reversed(list(enumerate(values)))}
        codes[col] = np.array([position.get(catboost_category_hash(str(v)), len(values))
                               for v in frame_test.iloc[:, col]], dtype=np.float64)
    return codes


def cb_save(model, path):
    """save_model(format="json") with the two values that change on every run (the model's guid and
    its training time) fixed, so that regenerating the corpus reproduces it byte for byte."""
    model.save_model(path, format="json")
    text = open(path).read()
    text = re.sub(r'"model_guid":"[^"]*"', '"model_guid":"golden-corpus"', text)
    text = re.sub(r'"train_finish_time":"[^"]*"', '"train_finish_time":"1970-01-01T00:00:00Z"',
                  text)
    with open(path, "w") as f:
        f.write(text)


def cb_case(out_root, name, description, params, X_train, y_train, X_test, range_=(1, 3),
            rng=None, cat_cols=()):
    """With `cat_cols`, X_train and X_test are DataFrames whose columns cat_cols hold categories
    (strings or ints, one-hot: one_hot_max_size covers them). X.csv then holds Grove's codes of
    those columns (cb_category_codes) and X_names.csv the test frame as pandas.to_csv writes it
    (header, category names), which the tests feed through Grove's category names."""
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    params = dict(params, random_seed=SEED % 2**31, thread_count=2, verbose=0,
                  allow_writing_files=False)
    classifier = params.get("loss_function") in ("Logloss", "MultiClass")
    model = (cb.CatBoostClassifier if classifier else cb.CatBoostRegressor)(**params)
    if cat_cols:
        model.fit(cb.Pool(X_train, y_train, cat_features=list(cat_cols)))
    else:
        model.fit(X_train, y_train)
    path = os.path.join(d, "catboost.json")
    cb_save(model, path)
    model_json = json.load(open(path))
    frame_test = None
    if cat_cols:
        frame_test = X_test.copy()
        X_test = np.zeros(frame_test.shape)
        for col in range(frame_test.shape[1]):
            if col not in cat_cols:
                X_test[:, col] = frame_test.iloc[:, col].to_numpy(dtype=np.float64)
    n_eq = put_thresholds(rng, X_test, cb_borders(model_json), 0.03, skip_cols=cat_cols)
    X_test = as_f32_text_exact(X_test)
    codes = {}
    if cat_cols:
        for col in range(frame_test.shape[1]):
            if col not in cat_cols:
                frame_test.iloc[:, col] = X_test[:, col]
        codes = cb_category_codes(model_json, X_train, frame_test, cat_cols)
    m = (cb.CatBoostClassifier if classifier else cb.CatBoostRegressor)()
    m.load_model(path, format="json")

    n, F = X_test.shape

    def make_pool(rows):
        if not cat_cols:
            return cb.Pool(X_test[rows])
        return cb.Pool(frame_test.iloc[rows], cat_features=list(cat_cols))

    pool = make_pool(slice(None))
    margin = np.asarray(m.predict(pool, prediction_type="RawFormulaVal")).reshape(n, -1)
    K = margin.shape[1]
    if params["loss_function"] == "Logloss":
        pred = np.asarray(m.predict_proba(pool))[:, 1].reshape(n, 1)
    elif classifier:
        pred = np.asarray(m.predict_proba(pool)).reshape(n, K)
    else:
        pred = np.asarray(m.predict(pool)).reshape(n, K)
    leaf = np.asarray(m.calc_leaf_indexes(pool)).reshape(n, -1)
    contribs = np.asarray(m.get_feature_importance(pool, type="ShapValues")).reshape(n, -1)
    cblock = contribs.reshape(n, K, F + 1)
    # ShapInteractionValues: CatBoost's feature block as it is; CatBoost's bias row and column hold
    # scale_and_bias's bias in every cell (their total is not the margin), so the bias entry is
    # laid out as XGBoost's and Grove's are: the expected value (ShapValues' bias column) at
    # [F][F], zeros in the rest of row and column F.
    ni = min(N_INTERACTION_ROWS, n)
    cat_inter = np.asarray(m.get_feature_importance(make_pool(slice(0, ni)),
                                                    type="ShapInteractionValues"))
    cat_inter = cat_inter.reshape(ni, K, F + 1, F + 1)
    iblock = np.zeros_like(cat_inter)
    iblock[:, :, :F, :F] = cat_inter[:, :, :F, :F]
    iblock[:, :, F, F] = cblock[:ni, :, F]
    inter = iblock.reshape(ni, -1)
    b, e = range_
    # CatBoost adds the bias only to ranges that start at tree 0 (so that ranges add up); Grove,
    # like XGBoost, puts the base margin in every range: margin_range.csv is in Grove's convention.
    margin_range = np.asarray(m.predict(pool, prediction_type="RawFormulaVal", ntree_start=b,
                                        ntree_end=e)).reshape(n, -1)
    scale, bias = m.get_scale_and_bias()
    if b > 0:
        margin_range = margin_range + np.asarray(bias, dtype=np.float64).reshape(1, -1)

    X_codes = X_test.copy()
    for col, c in codes.items():
        X_codes[:, col] = c
    write_csv(os.path.join(d, "X.csv"), X_codes, exact=True)
    if cat_cols:
        frame_test.to_csv(os.path.join(d, "X_names.csv"), index=False)
    write_csv(os.path.join(d, "margin.csv"), margin)
    write_csv(os.path.join(d, "pred.csv"), pred)
    write_csv(os.path.join(d, "leaf.csv"), leaf)
    write_csv(os.path.join(d, "contribs.csv"), contribs)
    write_csv(os.path.join(d, "interactions.csv"), inter)
    write_csv(os.path.join(d, "margin_range.csv"), margin_range)
    trees = model_json.get("oblivious_trees", model_json.get("trees"))
    meta = {
        "case": name,
        "library": "catboost",
        "library_version": cb.__version__,
        "description": description,
        "data_source": "numpy synthetic (seed %d)" % SEED,
        "objective": params["loss_function"],
        "grow_policy": params.get("grow_policy", "SymmetricTree"),
        "params": params,
        "num_boost_round": params["iterations"],
        "num_features": F,
        "num_outputs": K,
        "num_trees": len(trees),
        "nan_value_treatment": sorted({f["nan_value_treatment"] for f in
                                       model_json["features_info"]["float_features"]}),
        "scale_and_bias": model_json["scale_and_bias"],
        "categorical_features": list(cat_cols),
        "n_rows": n,
        "n_interaction_rows": ni,
        "n_test_values_equal_to_a_threshold": n_eq,
        "model_files": ["catboost.json"],
        **({"category_names": {
            "file": "X_names.csv",
            "layout": "X.csv's rows as pandas.to_csv writes the test frame (header, category "
                      "names); X.csv holds Grove's codes of the categorical columns: the position "
                      "of the name's CatBoost hash in the feature's categories (one-hot values, "
                      "then the categories its CTR tables hold), their count for a hash not "
                      "there",
            "unseen": {str(col): int((codes[col] == len(cb_values(model_json, col))).sum())
                       for col in cat_cols}}}
           if cat_cols else {}),
        "outputs": {
            "margin": {"file": "margin.csv", "shape": list(margin.shape)},
            "pred": {"file": "pred.csv", "shape": list(pred.shape)},
            "contribs": {"file": "contribs.csv", "shape": list(contribs.shape),
                         "layout": "row-major [row][output][feature 0..F-1, bias]",
                         "method": "get_feature_importance(type=\"ShapValues\")"},
            "interactions": {"file": "interactions.csv", "shape": list(inter.shape),
                             "rows": "first %d rows of X.csv" % ni,
                             "layout": "row-major [row][output][i 0..F][j 0..F], index F = bias",
                             "method": "get_feature_importance(type=\"ShapInteractionValues\"): "
                                       "the feature block; the expected value at [F][F]"},
            "leaf": {"file": "leaf.csv", "shape": list(leaf.shape)},
            "margin_range": {"file": "margin_range.csv", "shape": list(margin_range.shape),
                             "iteration_begin": b, "iteration_end": e,
                             "bias": "included (CatBoost's predict(ntree_start=b > 0) leaves "
                                     "it out: added here)"},
        },
        "unsupported": {},
        "not_generated": {},
        "checks": {
            "contribs_sum_vs_margin_max_rel_err": rel_err(cblock.sum(axis=2), margin),
            "interactions_sum_vs_margin_max_rel_err": rel_err(iblock.sum(axis=(2, 3)), margin[:ni]),
            "interactions_rowsum_vs_contribs_max_rel_err":
                rel_err(iblock.sum(axis=3), cblock[:ni]),
            "reload_json_vs_inmemory_max_rel_err": rel_err(
                np.asarray(model.predict(pool, prediction_type="RawFormulaVal")).reshape(n, -1),
                margin),
        },
    }
    assert meta["checks"]["contribs_sum_vs_margin_max_rel_err"] < 1e-4, meta["checks"]
    assert meta["checks"]["interactions_rowsum_vs_contribs_max_rel_err"] < 1e-4, meta["checks"]
    assert meta["checks"]["reload_json_vs_inmemory_max_rel_err"] < 1e-12, meta["checks"]
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def cb_category_names():
    """Category names of every length class of CityHash64 (0, 1-3, 4-8, 9-16, 17-32, 33-64, over 64
    bytes; the empty string and a non-ASCII name included), without commas or quotes."""
    text = ("Lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "
            "incididunt ut labore et dolore magna aliqua; Ut enim ad minim veniam quis nostrud "
            "exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat")
    return ["", "a", "lyon", "orl\u00e9ans", text[:13], text[:16], text[:23], text[:32],
            text[:40], text[:64], text[:65], text[:130]]


def cb_onehot_cases(out, metas, rng):
    """One-hot categorical features: a string column of every hash length class and an integer
    column; test rows with categories unseen in training."""
    import pandas as pd
    names = cb_category_names()
    unseen_names = ["tokyo", "Lorem ipsum dolor sit amet consectetur", "z" * 80, "Lyon"]

    def frame(n, f_num):
        X = synth(rng, n, f_num, nan_frac=0.05)
        city = rng.integers(0, len(names), size=n)
        size = rng.integers(0, 6, size=n)
        cols = {"x0": X[:, 0], "city": [names[i] for i in city], "x1": X[:, 1],
                "size": size.astype(np.int64)}
        for j in range(2, f_num):
            cols["x%d" % j] = X[:, j]
        return pd.DataFrame(cols), city, size, X

    # Regression: RMSE, symmetric trees.
    df, city, size, X = frame(1100, 3)
    effect_city = rng.normal(size=len(names)) * 2
    effect_size = np.array([0.0, 1.0, -1.5, 0.5, 2.0, -0.5])
    y = effect_city[city] + effect_size[size] + np.nan_to_num(X[:, 0]) + \
        rng.normal(scale=0.1, size=len(df))
    train, test = df.iloc[:-N_ROWS].reset_index(drop=True), df.iloc[-N_ROWS:].reset_index(drop=True)
    test.loc[:3, "city"] = unseen_names
    test.loc[4:5, "size"] = [7, 42]
    metas.append(cb_case(out, "cb_onehot_regression",
                         "RMSE, one-hot categorical city (12 strings, 0 to 130 bytes) and size "
                         "(6 integers), 20 iterations, depth 4; test rows with unseen categories",
                         {"loss_function": "RMSE", "iterations": 20, "depth": 4,
                          "learning_rate": 0.3, "one_hot_max_size": 255},
                         train, y[:-N_ROWS], test, range_=(2, 9), rng=rng, cat_cols=(1, 3)))

    # Multiclass: 3 classes, non-symmetric trees (Depthwise).
    df, city, size, X = frame(1100, 3)
    z = effect_city[city] + effect_size[size] + np.nan_to_num(X[:, 1])
    y = np.digitize(z + rng.normal(scale=0.3, size=len(df)), [-0.5, 1.0]).astype(int)
    train, test = df.iloc[:-N_ROWS].reset_index(drop=True), df.iloc[-N_ROWS:].reset_index(drop=True)
    test.loc[:3, "city"] = unseen_names
    test.loc[4:5, "size"] = [9, -1]
    metas.append(cb_case(out, "cb_onehot_multiclass",
                         "MultiClass, 3 classes, grow_policy Depthwise, one-hot categorical city "
                         "(12 strings) and size (6 integers), 10 iterations, depth 3; test rows "
                         "with unseen categories",
                         {"loss_function": "MultiClass", "iterations": 10, "depth": 3,
                          "learning_rate": 0.3, "one_hot_max_size": 255,
                          "grow_policy": "Depthwise"},
                         train, y[:-N_ROWS], test, range_=(2, 5), rng=rng, cat_cols=(1, 3)))


def cb_ctr_cases(out, metas, rng):
    """CTR features (target statistics of one categorical feature, max_ctr_complexity=1): a string
    column of every hash length class and an integer column with more categories than
    one_hot_max_size (CTRs), an integer column with fewer (one-hot) beside them; test rows with
    unseen categories."""
    import pandas as pd
    names = cb_category_names()
    unseen_names = ["tokyo", "Lorem ipsum dolor sit amet consectetur", "z" * 80, "Lyon"]

    def frame(n):
        X = synth(rng, n, 2, nan_frac=0.05)
        city = rng.integers(0, len(names), size=n)
        shop = rng.integers(0, 9, size=n)
        grade = rng.integers(0, 3, size=n)
        return pd.DataFrame({"x0": X[:, 0], "city": [names[i] for i in city], "x1": X[:, 1],
                             "shop": (shop * 7 + 3).astype(np.int64),
                             "grade": grade.astype(np.int64)}), city, shop, grade, X

    effect_city = rng.normal(size=len(names)) * 2
    effect_shop = rng.normal(size=9)
    common = {"one_hot_max_size": 4, "max_ctr_complexity": 1, "learning_rate": 0.3}
    cats = (1, 3, 4)

    def split(df):
        train = df.iloc[:-N_ROWS].reset_index(drop=True)
        test = df.iloc[-N_ROWS:].reset_index(drop=True)
        test.loc[:3, "city"] = unseen_names
        test.loc[4:5, "shop"] = [5, -7]
        return train, test

    def with_ctr_splits(meta):
        model_json = json.load(open(os.path.join(out, meta["case"], "catboost.json")))
        trees = model_json.get("oblivious_trees") or model_json.get("trees")
        text = json.dumps(trees)
        assert text.count("OnlineCtr") >= 3 and "OneHotFeature" in text, meta["case"]
        meta["ctr_types"] = sorted({c["ctr_type"] for c in model_json["features_info"]["ctrs"]})
        with open(os.path.join(out, meta["case"], "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        return meta

    df, city, shop, grade, X = frame(1300)
    y = effect_city[city] + effect_shop[shop] + grade * 0.8 + np.nan_to_num(X[:, 0]) + \
        rng.normal(scale=0.1, size=len(df))
    train, test = split(df)
    metas.append(with_ctr_splits(cb_case(
        out, "cb_ctr_regression",
        "RMSE, CTRs (Borders with two priors, Counter, Buckets, BinarizedTargetMeanValue) of "
        "city (12 strings, 0 to 130 bytes) and shop (9 integers), one-hot grade, 30 iterations, "
        "depth 4; test rows with unseen categories",
        dict(common, loss_function="RMSE", iterations=30, depth=4,
             simple_ctr=["Borders:Prior=-1/1:Prior=0.5/1", "Counter", "Buckets",
                         "BinarizedTargetMeanValue"]),
        train, y[:-N_ROWS], test, range_=(2, 9), rng=rng, cat_cols=cats)))

    df, city, shop, grade, X = frame(1300)
    z = effect_city[city] + effect_shop[shop] - grade * 0.6 + np.nan_to_num(X[:, 1])
    y = (z + rng.normal(scale=0.3, size=len(df)) > 0.3).astype(int)
    train, test = split(df)
    metas.append(with_ctr_splits(cb_case(
        out, "cb_ctr_binary",
        "Logloss, grow_policy Depthwise, CTRs (Borders, Counter, Buckets) of city and shop, "
        "one-hot grade, 20 iterations, depth 4; test rows with unseen categories",
        dict(common, loss_function="Logloss", iterations=20, depth=4, grow_policy="Depthwise",
             simple_ctr=["Borders", "Counter", "Buckets"]),
        train, y[:-N_ROWS], test, range_=(2, 9), rng=rng, cat_cols=cats)))

    df, city, shop, grade, X = frame(1300)
    z = effect_city[city] + effect_shop[shop] + grade * 0.5 + np.nan_to_num(X[:, 0])
    y = np.digitize(z + rng.normal(scale=0.3, size=len(df)), [-0.5, 1.0]).astype(int)
    train, test = split(df)
    metas.append(with_ctr_splits(cb_case(
        out, "cb_ctr_multiclass",
        "MultiClass, 3 classes, CTRs (Borders, Buckets, Counter) of city and shop, one-hot "
        "grade, 15 iterations, depth 3; test rows with unseen categories",
        dict(common, loss_function="MultiClass", iterations=15, depth=3,
             simple_ctr=["Borders", "Buckets", "Counter"]),
        train, y[:-N_ROWS], test, range_=(2, 5), rng=rng, cat_cols=cats)))


def cb_refused(refused, rng):
    """CatBoost models with categorical splits Grove cannot evaluate exactly: a CTR over a
    combination of two categorical features (max_ctr_complexity above 1)."""
    import pandas as pd
    n = 3000
    a = rng.choice(list("abcdefgh"), n)
    b = rng.choice(list("pqrstuvw"), n)
    effect = {(i, j): rng.normal() * 3 for i in "abcdefgh" for j in "pqrstuvw"}
    y = (np.array([effect[(i, j)] for i, j in zip(a, b)]) > 0).astype(int)
    model = cb.CatBoostClassifier(iterations=30, depth=4, max_ctr_complexity=4, random_seed=1,
                                  thread_count=2, verbose=0, allow_writing_files=False)
    model.fit(cb.Pool(pd.DataFrame({"c1": a, "c2": b}), y, cat_features=[0, 1]))
    path = os.path.join(refused, "cb_ctr_combination.json")
    cb_save(model, path)
    ctrs = json.load(open(path))["features_info"]["ctrs"]
    assert any(len(c["elements"]) > 1 for c in ctrs), "no combination CTR"


# ------------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "golden"))
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    rng = np.random.default_rng(SEED)
    metas = []

    def split(X, y):
        return X[:-N_ROWS], y[:-N_ROWS], X[-N_ROWS:].copy()

    # XGBoost regression.
    X = synth(rng, 1100, 6)
    y = X[:, 0] * 2 + np.sin(X[:, 1] * 3) + X[:, 2] * X[:, 3] + rng.normal(scale=0.1, size=len(X))
    metas.append(xgb_case(out, "xgb_regression", "reg:squarederror, 12 rounds, depth 4",
                          {"objective": "reg:squarederror", "max_depth": 4, "eta": 0.3,
                           "seed": 1, "nthread": 2},
                          12, *split(X, y), range_=(2, 7), rng=rng))

    # XGBoost binary with NaN (base_score estimated from the labels).
    X = synth(rng, 1100, 8, nan_frac=0.15)
    z = np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 1]) * 0.5 + np.isnan(X[:, 2]) * 1.5
    y = (z + rng.normal(scale=0.5, size=len(X)) > 0.2).astype(float)
    metas.append(xgb_case(out, "xgb_binary_nan", "binary:logistic, 15% NaN, 15 rounds, depth 5",
                          {"objective": "binary:logistic", "max_depth": 5, "eta": 0.3, "seed": 1,
                           "nthread": 2},
                          15, *split(X, y), rng=rng))

    # XGBoost multi-class (softprob, 3 classes).
    X = synth(rng, 1100, 5, nan_frac=0.05)
    y = (np.nan_to_num(X[:, 0]) > 0).astype(int) + (np.nan_to_num(X[:, 1]) > 0.5).astype(int)
    metas.append(xgb_case(out, "xgb_multiclass3", "multi:softprob, 3 classes, 8 rounds, depth 3",
                          {"objective": "multi:softprob", "num_class": 3, "max_depth": 3,
                           "eta": 0.3, "seed": 1, "nthread": 2},
                          8, *split(X, y.astype(float)), range_=(2, 5), rng=rng))

    # XGBoost categorical (partition-based splits + one-hot for a small feature).
    X = synth(rng, 1100, 5)
    X[:, 1] = rng.integers(0, 12, size=len(X))
    X[:, 3] = rng.integers(0, 3, size=len(X))
    X[rng.random(len(X)) < 0.05, 1] = np.nan
    effect = np.array([0.5, -1, 2, 0, 1.5, -2, 0.3, 1, -0.5, 2.5, -1.5, 0.8])
    y = X[:, 0] + np.where(np.isnan(X[:, 1]), 0.0, effect[np.nan_to_num(X[:, 1]).astype(int)]) \
        + (X[:, 3] == 2) * 1.0
    Xtr, ytr, Xte = split(X, y)
    Xte[:4, 1] = [12, 15, -1, 0.5]  # unseen / negative / non-integer categories
    metas.append(xgb_case(out, "xgb_categorical",
                          "reg:squarederror, categorical f1 (12 categories, partition splits) "
                          "and f3 (3 categories, one-hot), 10 rounds, depth 4; test rows with "
                          "unseen, negative and fractional categories",
                          {"objective": "reg:squarederror", "max_depth": 4, "eta": 0.3,
                           "seed": 1, "nthread": 2, "tree_method": "hist", "max_cat_to_onehot": 4},
                          10, Xtr, ytr, Xte, cat_cols=(1, 3), rng=rng))

    # XGBoost dart (weight_drop).
    X = synth(rng, 1100, 5)
    y = X[:, 0] - X[:, 1] ** 2 + rng.normal(scale=0.1, size=len(X))
    metas.append(xgb_case(out, "xgb_dart", "booster=dart, rate_drop 0.3, 10 rounds, depth 3",
                          {"objective": "reg:squarederror", "booster": "dart", "rate_drop": 0.3,
                           "skip_drop": 0.0, "max_depth": 3, "eta": 0.3, "seed": 1,
                           "nthread": 2},
                          10, *split(X, y), range_=(0, 10), rng=rng))

    # LightGBM binary with NaN.
    X = synth(rng, 1100, 6, nan_frac=0.15)
    z = np.nan_to_num(X[:, 0]) + np.isnan(X[:, 1]) * 1.0 - np.nan_to_num(X[:, 2])
    y = (z + rng.normal(scale=0.5, size=len(X)) > 0).astype(float)
    metas.append(lgb_case(out, "lgb_binary_nan", "binary, 15% NaN, 12 rounds, 8 leaves",
                          {"objective": "binary", "num_leaves": 8, "learning_rate": 0.3,
                           "min_data_in_leaf": 5},
                          12, *split(X, y), rng=rng))

    # LightGBM multi-class.
    X = synth(rng, 1100, 5)
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.3).astype(int) + (X[:, 2] > 1).astype(int)
    metas.append(lgb_case(out, "lgb_multiclass4", "multiclass, 4 classes, 6 rounds, 6 leaves",
                          {"objective": "multiclass", "num_class": 4, "num_leaves": 6,
                           "learning_rate": 0.3, "min_data_in_leaf": 5},
                          6, *split(X, y.astype(float)), range_=(1, 4), rng=rng))

    # LightGBM categorical.
    X = synth(rng, 1100, 4)
    X[:, 0] = rng.integers(0, 10, size=len(X))
    effect = np.array([1, -1, 2, 0, -2, 0.5, 1.5, -0.5, 3, -3])
    y = effect[X[:, 0].astype(int)] + X[:, 1] + rng.normal(scale=0.1, size=len(X))
    Xtr, ytr, Xte = split(X, y)
    Xte[:5, 0] = [10, 40, -1, np.nan, 2.7]  # unseen, beyond the bitset, negative, NaN, fractional
    metas.append(lgb_case(out, "lgb_categorical",
                          "regression, categorical f0 (10 categories), 10 rounds; test rows with "
                          "unseen, negative, NaN and fractional categories",
                          {"objective": "regression", "num_leaves": 8, "learning_rate": 0.3,
                           "min_data_in_leaf": 5, "min_data_per_group": 5, "cat_smooth": 1},
                          10, Xtr, ytr, Xte, cat_cols=(0,), rng=rng))

    # LightGBM zero_as_missing.
    X = synth(rng, 1100, 5)
    X[rng.random(X.shape) < 0.2] = 0.0
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) * 2 + (X[:, 1] == 0) * 1.0 + rng.normal(scale=0.1, size=len(X))
    metas.append(lgb_case(out, "lgb_zero_as_missing", "regression, zero_as_missing=true, 8 rounds",
                          {"objective": "regression", "zero_as_missing": True, "num_leaves": 8,
                           "learning_rate": 0.3, "min_data_in_leaf": 5},
                          8, *split(X, y), rng=rng))

    # LightGBM linear trees (the library refuses pred_contrib).
    X = synth(rng, 1100, 4, nan_frac=0.05)
    y = 2 * np.nan_to_num(X[:, 0]) + np.abs(np.nan_to_num(X[:, 1])) + rng.normal(scale=0.1,
                                                                                  size=len(X))
    metas.append(lgb_case(out, "lgb_linear_tree", "regression, linear_tree=true, 6 rounds",
                          {"objective": "regression", "linear_tree": True, "linear_lambda": 0.1,
                           "num_leaves": 6, "learning_rate": 0.3, "min_data_in_leaf": 10},
                          6, *split(X, y), rng=rng))

    # CatBoost (its own generator, so that the cases above do not depend on it).
    crng = np.random.default_rng(SEED + 39)
    X = synth(crng, 1100, 6, nan_frac=0.1)
    y = np.nan_to_num(X[:, 0]) * 2 + np.sin(np.nan_to_num(X[:, 1]) * 3) + np.isnan(X[:, 2]) \
        + crng.normal(scale=0.1, size=len(X))
    metas.append(cb_case(out, "cb_regression_nan", "RMSE, 10% NaN (nan_mode Min), 15 iterations, "
                         "depth 4", {"loss_function": "RMSE", "iterations": 15, "depth": 4,
                                     "learning_rate": 0.3, "nan_mode": "Min"},
                         *split(X, y), range_=(2, 7), rng=crng))
    X = synth(crng, 1100, 5, nan_frac=0.15)
    z = np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 1]) * 0.5 + np.isnan(X[:, 2]) * 1.5
    y = (z + crng.normal(scale=0.5, size=len(X)) > 0.2).astype(int)
    metas.append(cb_case(out, "cb_binary_nan_max", "Logloss, 15% NaN (nan_mode Max), 12 "
                         "iterations, depth 3", {"loss_function": "Logloss", "iterations": 12,
                                                 "depth": 3, "learning_rate": 0.3,
                                                 "nan_mode": "Max"},
                         *split(X, y), rng=crng))
    X = synth(crng, 1100, 5, nan_frac=0.05)
    y = (np.nan_to_num(X[:, 0]) > 0).astype(int) + (np.nan_to_num(X[:, 1]) > 0.5).astype(int)
    metas.append(cb_case(out, "cb_multiclass3", "MultiClass, 3 classes, 8 iterations, depth 3",
                         {"loss_function": "MultiClass", "iterations": 8, "depth": 3,
                          "learning_rate": 0.3},
                         *split(X, y), range_=(2, 5), rng=crng))
    X = synth(crng, 1100, 4, nan_frac=0.05)
    y = np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 1]) ** 2 + crng.normal(scale=0.1,
                                                                             size=len(X))
    metas.append(cb_case(out, "cb_depthwise", "RMSE, grow_policy Depthwise (non-symmetric "
                         "trees), 8 iterations, depth 3",
                         {"loss_function": "RMSE", "iterations": 8, "depth": 3,
                          "learning_rate": 0.3, "grow_policy": "Depthwise"},
                         *split(X, y), rng=crng))

    # CatBoost one-hot categorical features (cb_onehot_*): string and integer categories.
    cb_onehot_cases(out, metas, np.random.default_rng(SEED + 41))
    # CatBoost CTR features of single categorical features (cb_ctr_*).
    cb_ctr_cases(out, metas, np.random.default_rng(SEED + 42))

    # Treelite checkpoints of XGBoost, LightGBM and scikit-learn models (tl_*).
    import make_treelite_corpus
    metas.extend(make_treelite_corpus.make_cases(out))

    # Models the library serves but Grove refuses.
    refused = os.path.join(out, "refused")
    os.makedirs(refused)
    X = synth(rng, 200, 3)
    y = X[:, 0] + 1
    lin = xgb.train({"booster": "gblinear", "objective": "reg:squarederror", "nthread": 1,
                     "updater": "coord_descent", "seed": 1},
                    xgb.DMatrix(X, label=y), num_boost_round=3)
    lin.save_model(os.path.join(refused, "xgb_gblinear.json"))
    cb_refused(refused, np.random.default_rng(SEED + 40))
    with open(os.path.join(refused, "README.md"), "w") as f:
        f.write("Models the libraries serve but Grove refuses (a clear error, non-zero exit):\n\n"
                "- `xgb_gblinear.json`: XGBoost `booster=gblinear` (a linear model, no trees).\n"
                "- `cb_ctr_combination.json`: CatBoost CTR over a combination of two "
                "categorical features (max_ctr_complexity=4).\n")

    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("# Golden corpus\n\nGenerated by `scripts/make_golden_corpus.py` (seed %d) with "
                "XGBoost %s, LightGBM %s and CatBoost %s; same layout as `/work/shared/testdata` (see its "
                "README.md), plus `margin_range.csv`: the margin over the boosting rounds "
                "`[iteration_begin, iteration_end)` given in `meta.json`. Inputs (`X.csv`) are float32 "
                "values written in the shortest text that parses back to the exact float64 given to "
                "the library; outputs use `%%.9g`. The tl_* cases hold Treelite checkpoints "
                "(checkpoint.tl, written by `scripts/make_treelite_corpus.py`, which this script "
                "calls) with the outputs of the library that trained the model (scikit-learn's "
                "SHAP values from shap's TreeExplainer, or an enumeration of the feature subsets "
                "where shap has none: meta.json's shap_reference). Do not edit by hand: "
                "regenerate.\n\n"
                "| case | objective | F | K | trees | outputs | unsupported |\n"
                "| --- | --- | --- | --- | --- | --- | --- |\n"
                % (SEED, xgb.__version__, lgb.__version__, cb.__version__))
        for m in metas:
            f.write("| %s | %s | %d | %d | %d | %s | %s |\n" % (
                m["case"], m["objective"], m["num_features"], m["num_outputs"], m["num_trees"],
                ",".join(m["outputs"]), ",".join(m["unsupported"]) or "-"))
    total = 0
    for root, _, files in os.walk(out):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print("golden corpus: %d cases, %.1f KiB in %s" % (len(metas), total / 1024, out))
    if total > 2 * 1024 * 1024:
        print("golden corpus exceeds 2 MiB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

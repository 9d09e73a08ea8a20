#!/usr/bin/env python3
"""Generates the Treelite checkpoint cases of Grove's golden corpus (tests/golden/tl_*).

Each case holds checkpoint.tl (treelite.Model.serialize, Treelite 4.x) of a model trained by XGBoost,
LightGBM or scikit-learn, and the reference outputs of the library that trained it: margin.csv and
pred.csv from the library's own predict (checked against Treelite's GTIL on the checkpoint, so
that the checkpoint means what the library computes), contribs.csv (and interactions.csv where the
library or shap computes them) from XGBoost's pred_contribs, LightGBM's pred_contrib or
shap.TreeExplainer (path-dependent) for scikit-learn, and leaf.csv: the Treelite node id reached in
every tree (GTIL predict_leaf). Same layout as the rest of tests/golden (README.md there).

make_golden_corpus.py calls make_cases() so that regenerating the whole corpus keeps these cases;
run alone, this script rewrites only the tl_* cases, and the fuzzer's hand-made seeds
(tests/fuzz/seeds/treelite/: ModelBuilder models with the >, >= and == operators, float32
multi-target trees, averaged categorical multi-class trees).

Usage: python3 scripts/make_treelite_corpus.py [--out tests/golden]
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden_corpus import N_INTERACTION_ROWS, SEED, as_f32_text_exact, rel_err, synth, write_csv  # noqa: E402

import lightgbm as lgb  # noqa: E402
import shap  # noqa: E402
import sklearn  # noqa: E402
import sklearn.ensemble as ske  # noqa: E402
import treelite  # noqa: E402
import xgboost as xgb  # noqa: E402

# The library's predictions and the checkpoint's (GTIL) must agree this closely, or the case is wrong.
GTIL_TOLERANCE = 1e-5


def _interaction_block(phi_inter, expected, K, F):
    """shap's (n, F, F[, K]) interaction values -> rows of K blocks of (F+1)^2, bias at [F][F]."""
    phi_inter = np.asarray(phi_inter)
    if phi_inter.ndim == 3:
        phi_inter = phi_inter[..., None]
    n = phi_inter.shape[0]
    out = np.zeros((n, K, F + 1, F + 1))
    for k in range(K):
        out[:, k, :F, :F] = phi_inter[..., k]
        out[:, k, F, F] = np.atleast_1d(expected)[k]
    return out.reshape(n, -1)


def _contrib_block(phi, expected, K, F):
    """shap's (n, F[, K]) values -> rows of K blocks of F+1 (features, then the expected value)."""
    phi = np.asarray(phi)
    if phi.ndim == 2:
        phi = phi[..., None]
    n = phi.shape[0]
    out = np.zeros((n, K, F + 1))
    for k in range(K):
        out[:, k, :F] = phi[..., k]
        out[:, k, F] = np.atleast_1d(expected)[k]
    return out.reshape(n, -1)


def _brute_force_shap(tl_model, X, interactions):
    """Path-dependent SHAP values (and interaction values) of a checkpoint by enumerating every
    feature subset: v(S) is the sum over trees of the leaf values reached with the features of S
    known and the others averaged over the children by their covers (sum_hess, else data_count),
    the value function TreeSHAP computes the Shapley values of. The reference where shap has none
    (GradientBoosting multi-class, HistGradientBoosting categorical splits); independent of Grove.
    """
    import itertools
    import math

    model = json.loads(tl_model.dump_as_json(pretty_print=False))
    n, F = X.shape
    max_class = max(model["num_class"])
    K = model["num_target"] * max_class
    assert all(c >= 0 for c in model["target_id"] + model["class_id"]), "scalar trees only"
    trees = []
    for t, tree in enumerate(model["trees"]):
        nodes = {nd["node_id"]: nd for nd in tree["nodes"]}
        trees.append((nodes, model["target_id"][t] * max_class + model["class_id"][t]))
    base = np.asarray(model["base_scores"], dtype=np.float64)

    def cover(nd):
        return nd["sum_hess"] if "sum_hess" in nd else nd["data_count"]

    def goes_left(nd, x):
        if np.isnan(x):
            return nd["default_left"]
        if nd["node_type"] == "categorical_test_node":
            matched = 0 <= x <= 2 ** 24 and int(x) in nd["category_list"]
            return matched != nd["category_list_right_child"]
        t, op = nd["threshold"], nd["comparison_op"]
        return {"<": x < t, "<=": x <= t, ">": x > t, ">=": x >= t}[op]

    def expect(nodes, i, x, known):
        nd = nodes[i]
        if "leaf_value" in nd:
            return nd["leaf_value"]
        left, right = nd["left_child"], nd["right_child"]
        if nd["split_feature_id"] in known:
            return expect(nodes, left if goes_left(nd, x[nd["split_feature_id"]]) else right, x,
                          known)
        c = cover(nd)
        return (cover(nodes[left]) * expect(nodes, left, x, known) +
                cover(nodes[right]) * expect(nodes, right, x, known)) / c

    subsets = [frozenset(s) for r in range(F + 1) for s in itertools.combinations(range(F), r)]
    contribs = np.zeros((n, K, F + 1))
    inter = np.zeros((n, K, F + 1, F + 1))
    for r in range(n):
        x = X[r].astype(np.float32).astype(np.float64)
        v = {}
        for s in subsets:
            out = base.copy()
            for nodes, k in trees:
                out[k] += expect(nodes, 0, x, s)
            v[s] = out
        for i in range(F):
            for s in subsets:
                if i in s:
                    continue
                w = math.factorial(len(s)) * math.factorial(F - len(s) - 1) / math.factorial(F)
                contribs[r, :, i] += w * (v[s | {i}] - v[s])
        contribs[r, :, F] = v[frozenset()]
        if not interactions:
            continue
        for i in range(F):
            for j in range(F):
                if i == j:
                    continue
                for s in subsets:
                    if i in s or j in s:
                        continue
                    w = (math.factorial(len(s)) * math.factorial(F - len(s) - 2) /
                         (2 * math.factorial(F - 1)))
                    inter[r, :, i, j] += w * (v[s | {i, j}] - v[s | {i}] - v[s | {j}] + v[s])
            inter[r, :, i, i] = contribs[r, :, i] - inter[r, :, i, :F].sum(axis=1)
        inter[r, :, F, F] = v[frozenset()]
    return contribs.reshape(n, -1), inter.reshape(n, -1)


def _write_case(out_root, name, library, version, description, objective, tl_model, X, margin,
                pred, contribs, inter, unsupported, params, not_generated=None, shap_reference=None):
    """unsupported: outputs the library refuses (Grove must refuse them too); not_generated:
    outputs with no reference (Grove computes them; the corpus tests check what they can)."""
    d = os.path.join(out_root, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    path = os.path.join(d, "checkpoint.tl")
    tl_model.serialize(path)
    tl_model = treelite.Model.deserialize(path)  # every reference below reads the saved file
    n, F = X.shape
    margin = np.asarray(margin, dtype=np.float64).reshape(n, -1)
    pred = np.asarray(pred, dtype=np.float64).reshape(n, -1)
    K = margin.shape[1]
    X32 = X.astype(np.float32)
    gtil_margin = treelite.gtil.predict(tl_model, X32, pred_margin=True).reshape(n, -1)
    gtil_pred = treelite.gtil.predict(tl_model, X32).reshape(n, -1)
    leaf = treelite.gtil.predict_leaf(tl_model, X32).reshape(n, -1)
    checks = {"gtil_margin_vs_library_max_rel_err": rel_err(gtil_margin, margin),
              "gtil_pred_vs_library_max_rel_err": rel_err(gtil_pred, pred)}
    assert checks["gtil_margin_vs_library_max_rel_err"] < GTIL_TOLERANCE, (name, checks)
    assert checks["gtil_pred_vs_library_max_rel_err"] < GTIL_TOLERANCE, (name, checks)

    for file, values in (("X.csv", X), ("margin.csv", margin), ("pred.csv", pred),
                         ("leaf.csv", leaf)):
        write_csv(os.path.join(d, file), values, exact=file == "X.csv")
    outputs = {
        "margin": {"file": "margin.csv", "shape": list(margin.shape)},
        "pred": {"file": "pred.csv", "shape": list(pred.shape)},
        "leaf": {"file": "leaf.csv", "shape": list(leaf.shape),
                 "meaning": "Treelite node id reached in every tree (GTIL predict_leaf)"},
    }
    if contribs is not None:
        write_csv(os.path.join(d, "contribs.csv"), contribs)
        outputs["contribs"] = {"file": "contribs.csv", "shape": list(contribs.shape),
                               "layout": "row-major [row][output][feature 0..F-1, bias]"}
        checks["contribs_sum_vs_margin_max_rel_err"] = rel_err(
            contribs.reshape(n, K, F + 1).sum(axis=2), margin)
        assert checks["contribs_sum_vs_margin_max_rel_err"] < 1e-4, (name, checks)
    ni = 0
    if inter is not None:
        ni = inter.shape[0]
        write_csv(os.path.join(d, "interactions.csv"), inter)
        outputs["interactions"] = {"file": "interactions.csv", "shape": list(inter.shape),
                                   "rows": "first %d rows of X.csv" % ni,
                                   "layout": "row-major [row][output][i 0..F][j 0..F], index F = bias"}
    meta = {
        "case": name,
        "library": "treelite",
        "trained_by": library,
        "library_version": version,
        "treelite_version": treelite.__version__,
        "description": description,
        "data_source": "numpy synthetic (seed %d)" % SEED,
        "objective": objective,
        "params": params,
        "num_features": F,
        "num_outputs": K,
        "num_trees": int(leaf.shape[1]),
        "n_rows": n,
        "n_interaction_rows": ni,
        "model_files": ["checkpoint.tl"],
        "outputs": outputs,
        "shap_reference": shap_reference or "%s (the library that trained the model)" % library,
        "unsupported": unsupported,
        "not_generated": dict(not_generated or {}, margin_range="Treelite checkpoints have no "
                              "boosting rounds of their own"),
        "checks": checks,
    }
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def _sklearn_case(out_root, name, est, X_train, y_train, X_test, description, interactions=True):
    est.fit(X_train, y_train)
    n, F = X_test.shape
    classifier = hasattr(est, "predict_proba")
    hist = isinstance(est, (ske.HistGradientBoostingClassifier, ske.HistGradientBoostingRegressor))
    averaged = isinstance(est, (ske.RandomForestClassifier, ske.RandomForestRegressor,
                                ske.ExtraTreesClassifier, ske.ExtraTreesRegressor))
    if classifier:
        pred = est.predict_proba(X_test)
        if averaged:
            margin = pred  # a forest's margin is its averaged class distribution
        else:
            margin = est.decision_function(X_test).reshape(n, -1)
            if margin.shape[1] == 1:
                pred = pred[:, 1:]  # Treelite's binary classifier: one output, P(class 1)
    else:
        pred = est.predict(X_test)
        margin = pred
    K = np.asarray(margin).reshape(n, -1).shape[1]
    contribs = inter = None
    missing = {}  # references shap does not give
    try:
        explainer = shap.TreeExplainer(est)
    except shap.utils._exceptions.InvalidModelError as e:
        missing["contribs"] = missing["interactions"] = "shap: %s" % e
        explainer = None
    if explainer is not None:
        phi = explainer.shap_values(X_test, check_additivity=False)
        contribs = _contrib_block(phi, explainer.expected_value, K, F)
        sums = contribs.reshape(n, K, F + 1).sum(axis=2)
        if rel_err(sums, np.asarray(margin).reshape(n, K)) > 1e-4:
            # shap reads HistGradientBoosting's categorical splits as numeric ones.
            missing["contribs"] = missing["interactions"] = (
                "shap's values do not add up to the margin (categorical splits)")
            contribs = None
            explainer = None
    if explainer is None:
        pass
    elif interactions and not hist:
        ni = min(N_INTERACTION_ROWS, n)
        inter = _interaction_block(explainer.shap_interaction_values(X_test[:ni]),
                                   explainer.expected_value, K, F)
    elif hist:
        missing["interactions"] = "shap computes no interaction values for HistGradientBoosting"
    tl_model = treelite.sklearn.import_model(est)
    # Where shap gives no reference, enumerate the feature subsets (interactions: first rows).
    reference = "shap %s TreeExplainer (tree_path_dependent)" % shap.__version__
    if contribs is None:
        contribs, _ = _brute_force_shap(tl_model, X_test, False)
        reference = "subset enumeration of the checkpoint (%s)" % missing["contribs"]
    if inter is None:
        _, inter = _brute_force_shap(tl_model, X_test[:min(N_INTERACTION_ROWS, n)], True)
        reference += "; interactions by subset enumeration (%s)" % missing["interactions"]
    missing = {}
    params = {k: v for k, v in est.get_params().items()
              if isinstance(v, (int, float, str, bool)) or v is None}
    return _write_case(out_root, name, "scikit-learn", sklearn.__version__, description,
                       type(est).__name__, tl_model, X_test, margin, pred,
                       contribs, inter, {}, params, missing, reference)


def _built_model(threshold_type, num_target, num_class, ops, postprocessor, categorical=False,
                 average=False):
    """A small model made with Treelite's ModelBuilder: what no importer writes (>, >=, ==
    tests, float32 multi-target trees, per-target leaf vectors)."""
    from treelite.model_builder import (Metadata, ModelBuilder, PostProcessorFunc,
                                        TreeAnnotation)
    max_class = max(num_class)
    vector = num_target > 1 or max_class > 1
    n_trees = len(ops)
    builder = ModelBuilder(
        threshold_type=threshold_type, leaf_output_type=threshold_type,
        metadata=Metadata(num_feature=3, task_type="kMultiClf" if max_class > 1 else "kRegressor",
                          average_tree_output=average, num_target=num_target,
                          num_class=num_class,
                          leaf_vector_shape=(num_target, max_class) if vector else (1, 1)),
        tree_annotation=TreeAnnotation(num_tree=n_trees, target_id=[-1 if vector else 0] * n_trees,
                                       class_id=[-1 if vector else 0] * n_trees),
        postprocessor=PostProcessorFunc(name=postprocessor),
        base_scores=[0.25 * (k + 1) for k in range(num_target * max_class)])
    width = num_target * max_class
    for t, op in enumerate(ops):
        builder.start_tree()
        builder.start_node(0)
        if categorical and t == 0:
            builder.categorical_test(2, default_left=True, category_list=[0, 2, 5],
                                     category_list_right_child=True, left_child_key=1,
                                     right_child_key=2)
        else:
            builder.numerical_test(t % 2, 0.1 * (t + 1), default_left=t % 2 == 0, opname=op,
                                   left_child_key=1, right_child_key=2)
        builder.data_count(40)
        builder.end_node()
        for key, count in ((1, 15), (2, 25)):
            builder.start_node(key)
            values = [(key * 10 + t + k) / 8.0 for k in range(width)]
            builder.leaf(values if vector else values[0])
            builder.sum_hess(count * 0.5)
            builder.data_count(count)
            builder.end_node()
        builder.end_tree()
    return builder.commit()


def write_fuzz_seeds(seed_dir):
    """Hand-made checkpoints for tests/fuzz/treelite_fuzz.cc beside the golden ones."""
    os.makedirs(seed_dir, exist_ok=True)
    for name, model in (
            ("gt_ge_float32_multitarget.tl",
             _built_model("float32", 2, [1, 1], [">", ">=", "<", "<="], "identity")),
            ("multiclass_average_categorical.tl",
             _built_model("float64", 1, [3], ["<=", ">"], "softmax", categorical=True,
                          average=True)),
            ("multitarget_multiclass.tl",
             _built_model("float64", 2, [2, 2], [">=", "<"], "multiclass_ova")),
            ("eq_refused.tl", _built_model("float64", 1, [1], ["=="], "identity"))):
        model.serialize(os.path.join(seed_dir, name))


def make_cases(out_root):
    """Writes every tl_* case under out_root; returns their meta.json contents."""
    rng = np.random.default_rng(SEED + 41)
    metas = []
    F = 5
    X = as_f32_text_exact(synth(rng, 400, F, nan_frac=0.05))
    X_train, X_test = X[:300], X[300:]
    y_reg = np.nan_to_num(X_train[:, 0]) * 2 + np.sin(np.nan_to_num(X_train[:, 1])) + 0.1 * rng.normal(size=300)
    y_bin = (y_reg > np.median(y_reg)).astype(np.int32)
    y_3 = np.digitize(y_reg, np.quantile(y_reg, [1 / 3, 2 / 3])).astype(np.int32)
    X_dense = np.nan_to_num(X)  # scikit-learn's forests before 1.4 refuse NaN; keep them dense
    Xd_train, Xd_test = X_dense[:300], X_dense[300:]

    # XGBoost: hessian covers, float32 `<` tests, one tree per class and round.
    for name, params, y, rounds in (
            ("tl_xgb_binary_nan", {"objective": "binary:logistic", "max_depth": 4, "eta": 0.3,
                                   "seed": 1, "nthread": 2}, y_bin, 6),
            ("tl_xgb_multiclass3", {"objective": "multi:softprob", "num_class": 3, "max_depth": 3,
                                    "eta": 0.3, "seed": 1, "nthread": 2}, y_3, 4)):
        bst = xgb.train(params, xgb.DMatrix(X_train, label=y), rounds)
        dtest = xgb.DMatrix(X_test)
        n = X_test.shape[0]
        margin = bst.predict(dtest, output_margin=True).reshape(n, -1)
        pred = bst.predict(dtest).reshape(n, -1)
        contribs = bst.predict(dtest, pred_contribs=True).reshape(n, -1)
        ni = min(N_INTERACTION_ROWS, n)
        inter = bst.predict(xgb.DMatrix(X_test[:ni]), pred_interactions=True).reshape(ni, -1)
        metas.append(_write_case(out_root, name, "xgboost", xgb.__version__,
                                 "%s, %d rounds, depth %d, 5%% NaN" % (params["objective"], rounds,
                                                                        params["max_depth"]),
                                 params["objective"], treelite.frontend.from_xgboost(bst), X_test,
                                 margin, pred, contribs, inter, {}, params))

    # LightGBM: double `<=` tests, count covers, categorical splits as category lists.
    Xc = X.copy()
    Xc[:, 3] = rng.integers(0, 6, size=Xc.shape[0])
    yc = np.nan_to_num(Xc[:300, 0]) + np.where(np.isin(Xc[:300, 3], [1, 4]), 1.5, -0.5)
    yc3 = np.digitize(yc, np.quantile(yc, [1 / 3, 2 / 3])).astype(np.int32)
    for name, params, y, rounds, cats in (
            ("tl_lgb_regression_cat", {"objective": "regression", "num_leaves": 8,
                                       "min_data_in_leaf": 5, "cat_smooth": 1.0,
                                       "min_data_per_group": 5}, yc, 8, [3]),
            ("tl_lgb_multiclass3", {"objective": "multiclass", "num_class": 3, "num_leaves": 6,
                                    "min_data_in_leaf": 5}, yc3, 4, [])):
        params = dict(params, seed=SEED, num_threads=2, verbose=-1, deterministic=True)
        ds = lgb.Dataset(Xc[:300], label=y, categorical_feature=cats or "auto",
                         params={"verbose": -1})
        bst = lgb.train(params, ds, rounds)
        X_test = Xc[300:]
        n = X_test.shape[0]
        margin = bst.predict(X_test, raw_score=True).reshape(n, -1)
        pred = bst.predict(X_test).reshape(n, -1)
        contribs = bst.predict(X_test, pred_contrib=True).reshape(n, -1)
        metas.append(_write_case(
            out_root, name, "lightgbm", lgb.__version__,
            "%s, %d rounds%s" % (params["objective"], rounds,
                                 ", categorical feature 3" if cats else ""),
            params["objective"], treelite.frontend.from_lightgbm(bst), X_test, margin, pred,
            contribs, None, {"interactions": "LightGBM computes no SHAP interaction values"},
            params))

    # scikit-learn, through Treelite's own importer (groveml.Model.from_sklearn writes the same
    # checkpoints; tests/python checks it against these libraries directly).
    common = dict(random_state=1)
    metas.append(_sklearn_case(out_root, "tl_skl_rf_classifier3",
                               ske.RandomForestClassifier(n_estimators=6, max_depth=4, **common),
                               Xd_train, y_3, Xd_test, "RandomForestClassifier, 3 classes, 6 trees"))
    metas.append(_sklearn_case(out_root, "tl_skl_et_regressor",
                               ske.ExtraTreesRegressor(n_estimators=5, max_depth=4, **common),
                               Xd_train, y_reg, Xd_test, "ExtraTreesRegressor, 5 trees"))
    metas.append(_sklearn_case(out_root, "tl_skl_gb_binary",
                               ske.GradientBoostingClassifier(n_estimators=8, max_depth=3, **common),
                               Xd_train, y_bin, Xd_test, "GradientBoostingClassifier, binary"))
    metas.append(_sklearn_case(out_root, "tl_skl_gb_multiclass3",
                               ske.GradientBoostingClassifier(n_estimators=4, max_depth=2, **common),
                               Xd_train, y_3, Xd_test, "GradientBoostingClassifier, 3 classes"))
    metas.append(_sklearn_case(out_root, "tl_skl_hgb_regressor_nan",
                               ske.HistGradientBoostingRegressor(max_iter=8, max_leaf_nodes=8,
                                                                 **common),
                               X_train, y_reg, X_test, "HistGradientBoostingRegressor, 5% NaN"))
    metas.append(_sklearn_case(out_root, "tl_skl_hgb_binary_cat",
                               ske.HistGradientBoostingClassifier(max_iter=6, max_leaf_nodes=6,
                                                                  categorical_features=[3],
                                                                  **common),
                               Xc[:300], (yc > np.median(yc)).astype(np.int32), Xc[300:],
                               "HistGradientBoostingClassifier, binary, categorical feature 3"))

    # What no importer writes: >, >= tests on float32 thresholds, two targets; Treelite's own
    # prediction (GTIL) is the reference.
    built = _built_model("float32", 2, [1, 1], [">", ">=", "<", "<=", ">"], "identity")
    Xb = as_f32_text_exact(synth(rng, 60, 3, nan_frac=0.1))
    Xb[::7, 0] = np.float32(0.1)  # rows equal to thresholds (as float32)
    Xb[::5, 1] = np.float32(0.2)
    b32 = Xb.astype(np.float32)
    metas.append(_write_case(out_root, "tl_built_multitarget", "treelite", treelite.__version__,
                             "ModelBuilder: >, >=, <, <= tests, float32, 2 targets",
                             "identity", built, Xb,
                             treelite.gtil.predict(built, b32, pred_margin=True),
                             treelite.gtil.predict(built, b32), None, None, {}, {},
                             {"contribs": "no library computes SHAP values for this model",
                              "interactions": "no library computes SHAP values for this model"}))
    return metas


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    ap.add_argument("--out", default=os.path.join(root, "tests", "golden"))
    ap.add_argument("--fuzz-seeds", default=os.path.join(root, "tests", "fuzz", "seeds", "treelite"))
    args = ap.parse_args()
    write_fuzz_seeds(os.path.abspath(args.fuzz_seeds))
    metas = make_cases(os.path.abspath(args.out))
    for m in metas:
        print("%s: %s" % (m["case"], json.dumps(m["checks"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""scikit-learn forests as Treelite checkpoints (Model.from_sklearn), written here in Python.

The checkpoint is Treelite's serialization format v4 (little-endian scalars; arrays and strings as
a uint64 count and their elements), which Grove's C++ loader reads (core/model/treelite_loader.cc)
and Treelite 4, nvForest and Triton's FIL backend read too. Neither Treelite nor a pickle is
involved: the server that serves the file never runs scikit-learn code.

What each estimator becomes (so that Grove computes est.predict / predict_proba /
decision_function and shap.TreeExplainer(est) exactly):
  * Every split is `x <= threshold` (double) going left, NaN taking the node's missing_go_to_left
    child; covers are weighted_n_node_samples (shap's, as sum_hess) and n_node_samples
    (data_count); HistGradientBoosting nodes have their sample count.
  * RandomForest / ExtraTrees regressors: the leaf values averaged over the trees (one target per
    output column). Classifiers: each leaf's class distribution (normalised per output), averaged;
    the prediction is predict_proba (every class column, also for two classes).
  * GradientBoosting: leaf values times learning_rate, plus the initial estimator's constant raw
    prediction; sigmoid (alpha 2 for the exponential loss) or softmax over one tree per class.
  * HistGradientBoosting: one tree per class and iteration, the baseline prediction as the base
    score; sigmoid, softmax, or exp for the poisson and gamma losses. A categorical split lists
    the categories that go to one side, so that categories unknown to the model go where
    scikit-learn sends them (the missing-value side).
"""

import struct
from typing import List, Tuple

import numpy as np

# Treelite's enums (serialization v4).
_FLOAT64 = 3
_TASK_BINARY, _TASK_REGRESSOR, _TASK_MULTICLASS = 0, 1, 2
_LEAF, _NUMERICAL, _CATEGORICAL = 0, 1, 2
_OP_LE = 3
# Written as version 4.0.0: every Treelite 4 release reads it.
_VERSION = (4, 0, 0)


def _array(values, dtype) -> bytes:
    a = np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<"))
    return struct.pack("<Q", a.size) + a.tobytes()


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


class _Tree:
    """One tree's node arrays (Treelite's field order), filled node by node."""

    def __init__(self, n: int):
        self.n = n
        self.node_type = np.zeros(n, np.int8)
        self.cleft = np.full(n, -1, np.int32)
        self.cright = np.full(n, -1, np.int32)
        self.split_index = np.full(n, -1, np.int32)
        self.default_left = np.zeros(n, np.uint8)
        self.leaf_value = np.zeros(n, np.float64)
        self.threshold = np.zeros(n, np.float64)
        self.cmp = np.zeros(n, np.int8)
        self.category_list_right_child = np.zeros(n, np.uint8)
        self.leaf_vector: List[float] = []
        self.leaf_vector_begin = np.zeros(n, np.uint64)
        self.leaf_vector_end = np.zeros(n, np.uint64)
        self.category_list: List[int] = []
        self.category_list_begin = np.zeros(n, np.uint64)
        self.category_list_end = np.zeros(n, np.uint64)
        self.data_count = np.zeros(n, np.uint64)
        self.sum_hess = None  # float64 per node, when the estimator has weighted counts

    def split(self, i, feature, left, right, default_left, threshold=None, categories=None,
              categories_right=False):
        self.cleft[i], self.cright[i], self.split_index[i] = left, right, feature
        self.default_left[i] = bool(default_left)
        if categories is None:
            self.node_type[i], self.threshold[i], self.cmp[i] = _NUMERICAL, threshold, _OP_LE
        else:
            self.node_type[i] = _CATEGORICAL
            self.category_list_begin[i] = len(self.category_list)
            self.category_list.extend(int(c) for c in categories)
            self.category_list_end[i] = len(self.category_list)
            self.category_list_right_child[i] = bool(categories_right)

    def leaf(self, i, value):
        if np.ndim(value) == 0:
            self.leaf_value[i] = float(value)
        else:
            self.leaf_vector_begin[i] = len(self.leaf_vector)
            self.leaf_vector.extend(float(v) for v in np.ravel(value))
            self.leaf_vector_end[i] = len(self.leaf_vector)

    def serialize(self) -> bytes:
        n = self.n
        has_cat = bool(self.category_list)
        parts = [struct.pack("<i?", n, has_cat),
                 _array(self.node_type, np.int8), _array(self.cleft, np.int32),
                 _array(self.cright, np.int32), _array(self.split_index, np.int32),
                 _array(self.default_left, np.uint8), _array(self.leaf_value, np.float64),
                 _array(self.threshold, np.float64), _array(self.cmp, np.int8),
                 _array(self.category_list_right_child, np.uint8),
                 _array(self.leaf_vector, np.float64), _array(self.leaf_vector_begin, np.uint64),
                 _array(self.leaf_vector_end, np.uint64), _array(self.category_list, np.uint32),
                 _array(self.category_list_begin, np.uint64),
                 _array(self.category_list_end, np.uint64),
                 _array(self.data_count, np.uint64), _array(np.ones(n), np.uint8)]
        if self.sum_hess is None:
            parts += [_array([], np.float64), _array([], np.uint8)]
        else:
            parts += [_array(self.sum_hess, np.float64), _array(np.ones(n), np.uint8)]
        parts += [_array([], np.float64), _array([], np.uint8),  # gain: not recorded
                  struct.pack("<ii", 0, 0)]  # no optional per-tree / per-node fields
        return b"".join(parts)


def _checkpoint(num_feature, task_type, average, num_class, leaf_vector_shape, target_id,
                class_id, postprocessor, sigmoid_alpha, base_scores, trees) -> bytes:
    header = [struct.pack("<iiiBB", *_VERSION, _FLOAT64, _FLOAT64),
              struct.pack("<Q", len(trees)),
              struct.pack("<iB?i", num_feature, task_type, average, len(num_class)),
              _array(num_class, np.int32), _array(leaf_vector_shape, np.int32),
              _array(target_id, np.int32), _array(class_id, np.int32), _string(postprocessor),
              struct.pack("<ff", sigmoid_alpha, 1.0), _array(base_scores, np.float64),
              _string("{}"), struct.pack("<i", 0)]
    return b"".join(header) + b"".join(t.serialize() for t in trees)


def _sklearn_tree(tree, leaf_value) -> _Tree:
    """A fitted sklearn.tree._tree.Tree; leaf_value(node) gives a leaf's scalar or vector."""
    n = tree.node_count
    out = _Tree(n)
    missing_left = getattr(tree, "missing_go_to_left", None)
    for i in range(n):
        left, right = int(tree.children_left[i]), int(tree.children_right[i])
        if left == -1:
            out.leaf(i, leaf_value(i))
        else:
            out.split(i, int(tree.feature[i]), left, right,
                      bool(missing_left[i]) if missing_left is not None else True,
                      threshold=float(tree.threshold[i]))
    out.data_count[:] = tree.n_node_samples
    out.sum_hess = np.asarray(tree.weighted_n_node_samples, dtype=np.float64)
    return out


def _forest(est, classifier) -> bytes:
    n_outputs = int(est.n_outputs_)
    trees = [e.tree_ for e in est.estimators_]
    if not classifier:
        value = (lambda t: (lambda i: t.value[i, 0, 0])) if n_outputs == 1 else \
            (lambda t: (lambda i: t.value[i, :, 0]))
        return _checkpoint(est.n_features_in_, _TASK_REGRESSOR, True, [1] * n_outputs,
                           [n_outputs, 1], [0 if n_outputs == 1 else -1] * len(trees),
                           [0] * len(trees), "identity", 1.0, [0.0] * n_outputs,
                           [_sklearn_tree(t, value(t)) for t in trees])
    n_classes = np.atleast_1d(est.n_classes_).astype(int).tolist()
    if len(set(n_classes)) > 1:
        raise ValueError("from_sklearn: a multi-output classifier whose outputs have different "
                         f"numbers of classes ({n_classes}): Grove's outputs are one flat row")
    k = n_classes[0]

    def distribution(t):
        def leaf(i):
            v = np.asarray(t.value[i], dtype=np.float64)  # (outputs, classes)
            return v / v.sum(axis=1, keepdims=True)
        return leaf

    return _checkpoint(est.n_features_in_, _TASK_MULTICLASS, True, [k] * n_outputs,
                       [n_outputs, k], [-1] * len(trees), [-1] * len(trees),
                       "identity_multiclass", 1.0, [0.0] * (n_outputs * k),
                       [_sklearn_tree(t, distribution(t)) for t in trees])


def _gradient_boosting(est, classifier) -> bytes:
    init = getattr(est, "init_", None)
    if not (isinstance(init, str) and init == "zero") and \
            type(init).__name__ not in ("DummyRegressor", "DummyClassifier"):
        raise ValueError("from_sklearn: a GradientBoosting model whose init estimator "
                         f"({type(init).__name__}) is not constant: its first prediction is "
                         "not a tree ensemble")
    base = np.asarray(est._raw_predict_init(np.zeros((1, est.n_features_in_), np.float32)),
                      dtype=np.float64).ravel()
    stages = est.estimators_  # (n_estimators, K) DecisionTreeRegressors
    K = stages.shape[1]
    lr = float(est.learning_rate)
    trees, class_id = [], []
    for stage in stages:
        for k in range(K):
            t = stage[k].tree_
            trees.append(_sklearn_tree(t, lambda i, t=t: t.value[i, 0, 0] * lr))
            class_id.append(k)
    if not classifier:
        return _checkpoint(est.n_features_in_, _TASK_REGRESSOR, False, [1], [1, 1],
                           [0] * len(trees), [0] * len(trees), "identity", 1.0, base, trees)
    if K == 1:
        alpha = 2.0 if est.loss == "exponential" else 1.0
        return _checkpoint(est.n_features_in_, _TASK_BINARY, False, [1], [1, 1],
                           [0] * len(trees), [0] * len(trees), "sigmoid", alpha, base, trees)
    return _checkpoint(est.n_features_in_, _TASK_MULTICLASS, False, [K], [1, 1],
                       [0] * len(trees), class_id, "softmax", 1.0, base, trees)


def _hist_feature_map(est) -> Tuple[np.ndarray, List]:
    """(original column of each column the trees see, categories of each categorical one).
    With categorical features scikit-learn puts them first, ordinal-encoded."""
    pre = getattr(est, "_preprocessor", None)
    n = est.n_features_in_
    if pre is None:
        if np.any(getattr(est, "is_categorical_", None) is not None and est.is_categorical_):
            raise ValueError("from_sklearn: a HistGradientBoosting model with categorical "
                             "features needs scikit-learn 1.4 or later")
        return np.arange(n), []
    parts = {name: (trans, np.asarray(cols)) for name, trans, cols in pre.transformers_}
    if "encoder" not in parts or "numerical" not in parts:
        raise ValueError("from_sklearn: this HistGradientBoosting model's preprocessing is not "
                         "the one scikit-learn 1.4+ builds for categorical features")
    encoder, cat_mask = parts["encoder"]
    _, num_mask = parts["numerical"]
    columns = np.concatenate([np.flatnonzero(cat_mask), np.flatnonzero(num_mask)])
    categories = []
    for cats in encoder.categories_:
        cats = np.asarray(cats)
        if cats.dtype.kind == "f" and cats.size and np.isnan(cats[-1]):
            cats = cats[:-1]  # NaN, sorted last, is encoded as missing, not as a category
        if cats.dtype.kind not in "iuf" or np.any(~np.isfinite(cats)) or np.any(cats < 0) or \
                np.any(cats != np.floor(cats)):
            raise ValueError("from_sklearn: HistGradientBoosting categories that are not "
                             "non-negative integers (strings): Grove's splits test integer "
                             "category codes")
        categories.append(cats.astype(np.int64))
    return columns, categories


def _hist_gradient_boosting(est, classifier) -> bytes:
    columns, categories = _hist_feature_map(est)
    K = len(est._predictors[0])
    trees, class_id = [], []
    for predictors in est._predictors:
        for k, predictor in enumerate(predictors):
            nodes = predictor.nodes
            bitsets = predictor.raw_left_cat_bitsets
            out = _Tree(len(nodes))
            for i, node in enumerate(nodes):
                if node["is_leaf"]:
                    out.leaf(i, node["value"])
                    continue
                feature = int(node["feature_idx"])
                left, right = int(node["left"]), int(node["right"])
                missing_left = bool(node["missing_go_to_left"])
                if node["is_categorical"]:
                    known = categories[feature]  # encoded code j is category known[j]
                    words = bitsets[node["bitset_idx"]]
                    goes_left = np.array([(words[j >> 5] >> (j & 31)) & 1
                                          for j in range(len(known))], dtype=bool)
                    # Unknown categories and NaN take the missing side in scikit-learn: list the
                    # known categories of the other side.
                    if missing_left:
                        out.split(i, int(columns[feature]), left, right, True,
                                  categories=known[~goes_left], categories_right=True)
                    else:
                        out.split(i, int(columns[feature]), left, right, False,
                                  categories=known[goes_left], categories_right=False)
                else:
                    out.split(i, int(columns[feature]), left, right, missing_left,
                              threshold=float(node["num_threshold"]))
            out.data_count[:] = nodes["count"]
            trees.append(out)
            class_id.append(k)
    base = np.asarray(est._baseline_prediction, dtype=np.float64).ravel()
    if classifier:
        if K == 1:
            return _checkpoint(est.n_features_in_, _TASK_BINARY, False, [1], [1, 1],
                               [0] * len(trees), [0] * len(trees), "sigmoid", 1.0, base, trees)
        return _checkpoint(est.n_features_in_, _TASK_MULTICLASS, False, [K], [1, 1],
                           [0] * len(trees), class_id, "softmax", 1.0, base, trees)
    link = {"poisson": "exponential", "gamma": "exponential"}.get(est.loss, "identity")
    return _checkpoint(est.n_features_in_, _TASK_REGRESSOR, False, [1], [1, 1],
                       [0] * len(trees), [0] * len(trees), link, 1.0, base, trees)


_WRITERS = {
    "RandomForestRegressor": (_forest, False),
    "ExtraTreesRegressor": (_forest, False),
    "RandomForestClassifier": (_forest, True),
    "ExtraTreesClassifier": (_forest, True),
    "GradientBoostingRegressor": (_gradient_boosting, False),
    "GradientBoostingClassifier": (_gradient_boosting, True),
    "HistGradientBoostingRegressor": (_hist_gradient_boosting, False),
    "HistGradientBoostingClassifier": (_hist_gradient_boosting, True),
}


def checkpoint_bytes(est) -> Tuple[bytes, str]:
    """(a Treelite checkpoint of the fitted estimator, a name for error messages). TypeError for
    an estimator this module does not convert; ValueError for one it cannot convert exactly;
    scikit-learn's NotFittedError for an unfitted one."""
    name = None
    for cls in type(est).__mro__:
        if cls.__module__.split(".")[0] == "sklearn" and cls.__name__ in _WRITERS:
            name = cls.__name__
            break
    if name is None:
        raise TypeError("from_sklearn takes a fitted RandomForest / ExtraTrees / "
                        "GradientBoosting / HistGradientBoosting classifier or regressor (got "
                        f"{type(est).__name__})")
    from sklearn.utils.validation import check_is_fitted
    check_is_fitted(est)
    writer, classifier = _WRITERS[name]
    return writer(est, classifier), f"<sklearn.{type(est).__name__}>"

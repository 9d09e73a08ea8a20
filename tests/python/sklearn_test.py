"""groveml.Model.from_sklearn: RandomForest / ExtraTrees / GradientBoosting / HistGradientBoosting
classifiers and regressors written as Treelite checkpoints, exact against predict /
predict_proba / decision_function and shap.TreeExplainer (values and interaction values); save()
writes a file that groveml, `grove` and Treelite read to the same numbers; what is refused."""

import numpy as np
import pytest
from conftest import need, run_cli, write_csv

import groveml

TOL = 1e-5


def rel_err(got, want):
    got = np.asarray(got, np.float64).ravel()
    want = np.asarray(want, np.float64).ravel()
    assert got.shape == want.shape
    return float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))))


def data(seed, nan=False, categorical=False):
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(300, 5)) * 64) / 64
    if categorical:
        X[:, 3] = rng.integers(0, 6, size=300)
    y = X[:, 0] * 2 + np.sin(X[:, 1]) + (np.isin(X[:, 3], [1, 4]) if categorical else 0)
    y = y + 0.1 * rng.normal(size=300)
    if nan:
        X[rng.random(size=X.shape) < 0.05] = np.nan
    X[:40:3, 0] = X[40:80:3, 0]  # repeated values, some of them thresholds
    return X[:200], y[:200], X[200:], y


def estimators():
    ske = need("sklearn.ensemble")
    common = dict(random_state=3)
    bins = lambda y: (y > np.median(y)).astype(int)  # noqa: E731
    thirds = lambda y: np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))  # noqa: E731
    same = lambda y: y  # noqa: E731
    return [
        ("rf_classifier3", ske.RandomForestClassifier(n_estimators=5, max_depth=5, **common),
         thirds, {}),
        ("rf_classifier2_nan", ske.RandomForestClassifier(n_estimators=4, max_depth=4, **common),
         bins, {"nan": True}),
        ("rf_regressor", ske.RandomForestRegressor(n_estimators=4, max_depth=5, **common), same,
         {}),
        ("et_classifier", ske.ExtraTreesClassifier(n_estimators=4, max_depth=4, **common), bins,
         {}),
        ("et_regressor", ske.ExtraTreesRegressor(n_estimators=4, max_depth=5, **common), same,
         {}),
        ("gb_regressor", ske.GradientBoostingRegressor(n_estimators=6, max_depth=3, **common),
         same, {}),
        ("gb_binary", ske.GradientBoostingClassifier(n_estimators=6, max_depth=3, **common),
         bins, {}),
        ("gb_binary_exponential", ske.GradientBoostingClassifier(
            n_estimators=4, max_depth=2, loss="exponential", **common), bins, {}),
        ("gb_multiclass3", ske.GradientBoostingClassifier(n_estimators=4, max_depth=2, **common),
         thirds, {}),
        ("hgb_regressor_nan", ske.HistGradientBoostingRegressor(max_iter=6, max_leaf_nodes=8,
                                                                **common), same, {"nan": True}),
        ("hgb_poisson", ske.HistGradientBoostingRegressor(max_iter=5, loss="poisson", **common),
         lambda y: np.exp(y / 4), {}),
        ("hgb_binary_categorical", ske.HistGradientBoostingClassifier(
            max_iter=5, max_leaf_nodes=6, categorical_features=[3], **common), bins,
         {"nan": True, "categorical": True}),
        ("hgb_multiclass3", ske.HistGradientBoostingClassifier(max_iter=4, max_leaf_nodes=6,
                                                               **common), thirds, {}),
    ]


CASES = ["rf_classifier3", "rf_classifier2_nan", "rf_regressor", "et_classifier",
         "et_regressor", "gb_regressor", "gb_binary", "gb_binary_exponential", "gb_multiclass3",
         "hgb_regressor_nan", "hgb_poisson", "hgb_binary_categorical", "hgb_multiclass3"]


def fitted(name):
    for case, est, target, opts in estimators():
        if case == name:
            X, y, X_test, _ = data(len(name), **opts)
            return est.fit(X, target(y)), X_test
    raise KeyError(name)


def library_outputs(est, X):
    """(prediction, margin) as the library computes them, in Grove's columns."""
    n = len(X)
    if not hasattr(est, "predict_proba"):
        pred = est.predict(X).reshape(n, -1)
        if type(est).__name__.startswith("HistGradientBoosting") and est.loss == "poisson":
            return pred, np.log(pred)
        return pred, pred
    proba = est.predict_proba(X)
    if type(est).__name__.startswith(("RandomForest", "ExtraTrees")):
        return proba, proba  # an averaged class distribution is its own margin
    margin = est.decision_function(X).reshape(n, -1)
    return (proba[:, 1:] if margin.shape[1] == 1 else proba), margin


@pytest.mark.parametrize("name", CASES)
def test_predictions_match_the_library(name):
    est, X = fitted(name)
    model = groveml.Model.from_sklearn(est, device="cpu")
    assert model.format == "treelite-checkpoint"
    pred, margin = library_outputs(est, X)
    assert rel_err(model.predict(X), pred) < TOL, name
    assert rel_err(model.predict(X, kind="margin"), margin) < TOL, name
    assert rel_err(model.predict(X.astype(np.float32)), pred) < TOL, name


@pytest.mark.parametrize("name", CASES)
def test_shap_values_match_tree_explainer(name):
    shap = need("shap")
    est, X = fitted(name)
    model = groveml.Model.from_sklearn(est, device="cpu")
    _, margin = library_outputs(est, X)
    try:
        explainer = shap.TreeExplainer(est)
    except Exception as e:  # shap refuses some models (GradientBoosting multi-class)
        pytest.skip(f"shap: {e}")
    phi = np.asarray(explainer.shap_values(X, check_additivity=False))
    K = margin.shape[1]
    phi = phi.reshape(len(X), X.shape[1], -1)[..., :K]
    expected = np.atleast_1d(explainer.expected_value)[:K]
    if rel_err(phi.sum(axis=1) + expected, margin) > 1e-6:
        pytest.skip("shap's values do not add up to the margin (it reads HistGradientBoosting's "
                    "categorical splits as numeric)")
    got = model.explain(X).reshape(len(X), K, X.shape[1] + 1)
    assert rel_err(got[..., :-1], np.moveaxis(phi, 2, 1)) < TOL, name
    assert rel_err(got[..., -1], np.broadcast_to(expected, (len(X), K))) < TOL, name
    if name.startswith("hgb"):
        return  # shap has no interaction values for HistGradientBoosting
    inter = np.asarray(explainer.shap_interaction_values(X[:10]))
    inter = inter.reshape(10, X.shape[1], X.shape[1], -1)[..., :K]
    got = model.explain(X[:10], interactions=True).reshape(10, K, X.shape[1] + 1, X.shape[1] + 1)
    assert rel_err(got[:, :, :-1, :-1], np.moveaxis(inter, 3, 1)) < TOL, name


def test_categories_unknown_to_the_model_take_the_missing_side():
    est, X = fitted("hgb_binary_categorical")
    model = groveml.Model.from_sklearn(est, device="cpu")
    X = X.copy()
    X[:20, 3] = 17  # never seen in training
    X[20:40, 3] = -2  # negative: missing for scikit-learn
    assert rel_err(model.predict(X), est.predict_proba(X)[:, 1:]) < TOL


def test_saved_checkpoint_serves_the_same_numbers(tmp_path, cli):
    est, X = fitted("rf_classifier3")
    model = groveml.Model.from_sklearn(est, device="cpu")
    path = tmp_path / "checkpoint.tl"
    model.save(path)
    again = groveml.Model(path, device="cpu")
    assert np.array_equal(again.predict(X), model.predict(X))
    x_path = write_csv(tmp_path / "x.csv", X)
    want = run_cli(cli, ["predict"], str(path), x_path)
    assert rel_err(want, est.predict_proba(X)) < TOL
    # Treelite reads what groveml wrote, to the same numbers.
    treelite = need("treelite")
    tl = treelite.Model.deserialize(str(path))
    gtil = treelite.gtil.predict(tl, X.astype(np.float32)).reshape(len(X), -1)
    assert rel_err(gtil, est.predict_proba(X)) < TOL


def test_refused_estimators_say_why():
    ske = need("sklearn.ensemble")
    X, y, _, _ = data(1)
    with pytest.raises(TypeError, match="from_sklearn takes a fitted RandomForest"):
        groveml.Model.from_sklearn(ske.AdaBoostRegressor(n_estimators=2).fit(X[:, :2], y))
    with pytest.raises(Exception, match="not fitted"):
        groveml.Model.from_sklearn(ske.RandomForestRegressor())
    linear = need("sklearn.linear_model")
    gb = ske.GradientBoostingRegressor(n_estimators=2, init=linear.LinearRegression())
    with pytest.raises(ValueError, match="init estimator"):
        groveml.Model.from_sklearn(gb.fit(X, y))


def test_string_categories_are_refused():
    pd = need("pandas")
    ske = need("sklearn.ensemble")
    X, y, _, _ = data(2)
    frame = pd.DataFrame({"a": X[:, 0], "city": pd.Categorical(
        np.where(X[:, 1] > 0, "paris", "brest"))})
    est = ske.HistGradientBoostingRegressor(max_iter=2, categorical_features="from_dtype")
    with pytest.raises(ValueError, match="strings"):
        groveml.Model.from_sklearn(est.fit(frame, y))


def test_multi_output_forests_are_one_target_per_output():
    ske = need("sklearn.ensemble")
    X, y, X_test, _ = data(4)
    Y = np.c_[y, -2 * y + X[:, 2], X[:, 3]]
    reg = ske.RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(X, Y)
    model = groveml.Model.from_sklearn(reg, device="cpu")
    assert model.num_outputs == 3
    assert rel_err(model.predict(X_test), reg.predict(X_test)) < TOL
    labels = np.c_[y > 0, X[:, 1] > 0.5].astype(int)
    clf = ske.ExtraTreesClassifier(n_estimators=3, max_depth=4, random_state=0).fit(X, labels)
    model = groveml.Model.from_sklearn(clf, device="cpu")
    want = np.concatenate(clf.predict_proba(X_test), axis=1)  # [output][class]
    assert rel_err(model.predict(X_test), want) < TOL
    phi = model.explain(X_test[:5]).reshape(5, 4, X.shape[1] + 1)
    assert rel_err(phi.sum(axis=2), want[:5]) < TOL

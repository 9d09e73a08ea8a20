"""Shared fixtures of the groveml tests (tests/python, run by CTest with pytest; see CMakeLists.txt).

Environment (CTest sets it): PYTHONPATH holds <build>/python (the package as the build lays it
out), GROVE_CLI the `grove` binary and GROVED the groved binary of the same build, the references
the package is compared with. A missing tool skips its tests, unless GROVE_E2E_REQUIRE_TOOLS=1 or
CI is set (scripts/test.sh, .ci/run), where it fails them.
"""

import importlib
import os
import subprocess
import sys

import numpy as np
import pytest

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "e2e"))


def require_tools():
    return os.environ.get("GROVE_E2E_REQUIRE_TOOLS", "") not in ("", "0") or bool(
        os.environ.get("CI"))


def need(module):
    """The module, or the test skipped (failed where every tool must be there)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if require_tools():
            pytest.fail(f"{module} is missing and GROVE_E2E_REQUIRE_TOOLS/CI is set: {e}")
        pytest.skip(f"{module} is missing: {e}")


def need_binary(var):
    path = os.environ.get(var, "")
    if not path or not os.access(path, os.X_OK):
        if require_tools():
            pytest.fail(f"${var} does not name an executable (got {path!r})")
        pytest.skip(f"${var} does not name an executable")
    return path


@pytest.fixture(scope="session")
def cli():
    return need_binary("GROVE_CLI")


def write_csv(path, x):
    """Rows as `grove` reads them: no header, values as exact decimal text, nan = missing."""
    with open(path, "w") as f:
        for row in np.asarray(x, dtype=np.float64):
            f.write(",".join("nan" if np.isnan(v) else repr(float(v)) for v in row) + "\n")
    return path


def run_cli(cli, args, model, x_path):
    """`grove` on a CSV: its results as float32 (its %.9g text round-trips float32 exactly)."""
    r = subprocess.run([cli] + list(args) + ["--model", str(model), "--input", str(x_path),
                                              "--no-progress"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"grove {' '.join(args)} failed: {r.stderr}"
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    return np.array([[float(v) for v in line.split(",")] for line in lines],
                    dtype=np.float64).astype(np.float32)


def assert_bitwise(got, want, what=""):
    """Same float32 bits (NaN equal to NaN)."""
    got = np.ascontiguousarray(got, dtype=np.float32)
    want = np.ascontiguousarray(want, dtype=np.float32)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    if not same.all():
        r, c = np.argwhere(~same.reshape(got.shape[0], -1))[0]
        raise AssertionError(f"{what}: {int((~same).sum())} values differ; first at row {r} col "
                             f"{c}: {got.reshape(got.shape[0], -1)[r, c]!r} != "
                             f"{want.reshape(want.shape[0], -1)[r, c]!r}")


def make_data(n=300, f=6, seed=0, missing=0.1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, f))
    x[rng.random(size=x.shape) < missing] = np.nan
    y = (np.nan_to_num(x[:, 0]) + 0.5 * np.nan_to_num(x[:, 1]) ** 2
         - np.nan_to_num(x[:, 2]) * np.nan_to_num(x[:, 3]) + rng.normal(scale=0.3, size=n))
    return x, y


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """Small models trained here: {name: (path, X)}; feature names a..f."""
    xgb = need("xgboost")
    lgb = need("lightgbm")
    pd = need("pandas")
    d = tmp_path_factory.mktemp("models")
    out = {}
    x, y = make_data()
    names = ["age", "income", "debt", "score", "tenure", "rate"]

    booster = xgb.train({"objective": "binary:logistic", "max_depth": 4, "eta": 0.3, "nthread": 1,
                         "base_score": 0.5},
                        xgb.DMatrix(x, label=(y > 0).astype(int), feature_names=names),
                        num_boost_round=12)
    booster.save_model(str(d / "xgb_binary.json"))
    out["xgb_binary"] = (str(d / "xgb_binary.json"), x)

    cls = (np.digitize(np.nan_to_num(y), [-0.5, 0.8])).astype(int)
    booster = xgb.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 3,
                         "nthread": 1}, xgb.DMatrix(x, label=cls), num_boost_round=5)
    booster.save_model(str(d / "xgb_multi.json"))
    out["xgb_multi"] = (str(d / "xgb_multi.json"), x)

    lgb_model = lgb.train({"objective": "regression", "num_leaves": 15, "verbose": -1,
                           "num_threads": 1, "min_data_in_leaf": 5},
                          lgb.Dataset(pd.DataFrame(x, columns=names), label=y),
                          num_boost_round=15)
    lgb_model.save_model(str(d / "lgb_reg.txt"))
    out["lgb_reg"] = (str(d / "lgb_reg.txt"), x)
    return out


@pytest.fixture(scope="session")
def categorical_frames():
    """(train DataFrame, label) with a string categorical, an integer categorical and numbers."""
    pd = need("pandas")
    rng = np.random.default_rng(7)
    n = 400
    df = pd.DataFrame({
        "num": rng.normal(size=n),
        "color": pd.Categorical(rng.choice(["red", "green", "blue", "teal"], n)),
        "size": pd.Categorical(rng.choice([3, 5, 7], n)),
        "other": rng.normal(size=n),
    })
    y = (df["num"].to_numpy() + np.where(df["color"] == "green", 2.0, 0.0)
         - np.where(df["size"] == 5, 1.5, 0.0) + rng.normal(scale=0.2, size=n))
    return df, y


@pytest.fixture(scope="session")
def categorical_models(categorical_frames, tmp_path_factory):
    """{name: path} of an XGBoost and a LightGBM model trained on a DataFrame with categorical
    columns (both store their categories)."""
    xgb = need("xgboost")
    lgb = need("lightgbm")
    df, y = categorical_frames
    d = tmp_path_factory.mktemp("categorical")
    reg = xgb.XGBRegressor(n_estimators=8, max_depth=4, enable_categorical=True,
                           tree_method="hist", max_cat_to_onehot=1, n_jobs=1)
    reg.fit(df, y)
    reg.save_model(str(d / "xgb_cat.json"))
    booster = lgb.train({"objective": "regression", "num_leaves": 15, "verbose": -1,
                         "num_threads": 1, "min_data_in_leaf": 5, "min_data_per_group": 5,
                         "cat_smooth": 1}, lgb.Dataset(df, label=y), num_boost_round=10)
    booster.save_model(str(d / "lgb_cat.txt"))
    return {"xgb_cat": str(d / "xgb_cat.json"), "lgb_cat": str(d / "lgb_cat.txt")}

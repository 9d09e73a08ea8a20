"""groveml.Model: the same numbers as the `grove` CLI bit for bit (golden corpus and models trained
here, float64 and float32 rows, predict / explain / interactions / interventional), pandas and Arrow
inputs, categoricals, bad input, shap.Explanation and its plots, top-k, the GIL."""

import glob
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from conftest import SOURCE_DIR, assert_bitwise, need, run_cli, write_csv

import groveml
import groveml._groups


def read_csv(path):
    rows = []
    for line in open(path):
        if line.strip():
            rows.append([float("nan") if v.strip() in ("", "nan") else float(v)
                         for v in line.split(",")])
    return np.array(rows, dtype=np.float64)


def golden_cases():
    out = []
    for d in sorted(glob.glob(os.path.join(SOURCE_DIR, "tests", "golden", "*"))):
        for name in ("model.json", "model.txt", "checkpoint.tl"):
            if os.path.isfile(os.path.join(d, name)) and os.path.isfile(os.path.join(d, "X.csv")):
                out.append((os.path.basename(d), os.path.join(d, name), os.path.join(d, "X.csv")))
    return out


@pytest.mark.parametrize("case,model_path,x_path", golden_cases(), ids=lambda v: str(v)[-30:])
def test_golden_corpus_matches_cli(cli, case, model_path, x_path):
    model = groveml.Model(model_path)
    x = read_csv(x_path)
    for kind in ("prediction", "margin", "leaf"):
        want = run_cli(cli, ["predict", "--kind", kind], model_path, x_path)
        got = model.predict(x, kind=kind)
        assert_bitwise(np.asarray(got, np.float32).reshape(want.shape), want, f"{case} {kind}")
    if not model.describe()["explain_engine"].startswith("unavailable"):
        want = run_cli(cli, ["explain"], model_path, x_path)
        assert_bitwise(model.explain(x).reshape(want.shape), want, f"{case} explain")
    else:
        with pytest.raises(RuntimeError, match="linear"):
            model.explain(x)


@pytest.mark.parametrize("name", ["xgb_binary", "xgb_multi", "lgb_reg"])
def test_trained_models_match_cli(cli, models, tmp_path, name):
    path, x = models[name]
    model = groveml.Model(path)
    x_path = write_csv(tmp_path / "x.csv", x)
    want = run_cli(cli, ["explain"], path, x_path)
    got = model.explain(x)
    assert got.shape == ((len(x), model.num_features + 1) if model.num_outputs == 1 else
                         (len(x), model.num_outputs, model.num_features + 1))
    assert_bitwise(got.reshape(want.shape), want, f"{name} explain")
    want = run_cli(cli, ["explain", "--interactions"], path, x_path)
    got = model.explain(x[:40], interactions=True)
    assert_bitwise(got.reshape(40, -1), want[:40], f"{name} interactions")
    want = run_cli(cli, ["predict", "--kind", "margin", "--iteration-begin", "1",
                         "--iteration-end", "3"], path, x_path)
    got = model.predict(x, kind="margin", iteration_range=(1, 3))
    assert_bitwise(np.asarray(got).reshape(want.shape), want, f"{name} margin range")
    # float32 rows: the CLI on the same float values
    x32 = x.astype(np.float32)
    want = run_cli(cli, ["explain"], path, write_csv(tmp_path / "x32.csv", x32))
    assert_bitwise(model.explain(x32).reshape(want.shape), want, f"{name} explain float32")


def test_float32_is_not_copied(models):
    path, x = models["xgb_binary"]
    model = groveml.Model(path)
    x32 = np.ascontiguousarray(x, dtype=np.float32)
    assert np.shares_memory(model.rows(x32).values, x32)
    assert model.rows(x).values.dtype == np.float64  # float64 goes to the converter, as the CLI's
    assert model.rows(np.nan_to_num(x).astype(np.int64)).values.dtype == np.float64


@pytest.mark.parametrize("name", ["xgb_binary", "xgb_multi"])
def test_predict_row_matches_predict(models, name):
    path, x = models[name]
    model = groveml.Model(path, device="cpu")
    x32 = np.ascontiguousarray(x, dtype=np.float32)
    for kind in ("prediction", "margin", "leaf"):
        want = model.predict_matrix(model.rows(x32), kind)
        out = np.empty(want.shape[1], np.float32)
        for r in range(len(x32)):
            assert model.predict_row(x32[r], kind, out=out) is out
            assert_bitwise(out, want[r], f"{name} {kind} row {r}")
        # Another dtype is converted; the result is the same.
        assert_bitwise(model.predict_row(x[0].tolist(), kind), want[0], f"{name} {kind} list")
    with pytest.raises(ValueError, match="features"):
        model.predict_row(x32[0, :-1])
    with pytest.raises(ValueError, match="out has"):
        model.predict_row(x32[0], out=np.empty(7, np.float32))


def test_interventional_matches_cli(cli, models, tmp_path):
    path, x = models["xgb_binary"]
    model = groveml.Model(path)
    bg = x[:50]
    bg_path = write_csv(tmp_path / "bg.csv", bg)
    x_path = write_csv(tmp_path / "x.csv", x[:60])
    for space in ("margin", "probability", "probability_linearized"):
        want = run_cli(cli, ["explain", "--background", bg_path, "--output-space", space],
                       path, x_path)
        got_file = model.explain(x[:60], background=bg_path, output_space=space)
        got_rows = model.explain(x[:60], method="interventional", background=bg,
                                 output_space=space)
        assert_bitwise(got_file, want, f"interventional {space} (file)")
        assert_bitwise(got_rows, want, f"interventional {space} (rows)")
    with_default = groveml.Model(path, background=bg)
    assert_bitwise(with_default.explain(x[:60]), model.explain(x[:60], background=bg))
    assert_bitwise(with_default.explain(x[:60], method="path_dependent"), model.explain(x[:60]))


def test_interventional_cpu_compare_bench_runs(models, tmp_path):
    """bench/interventional_cpu_compare.py (docs/benchmarks/interventional.md) on a small model:
    groveml and shap's interventional TreeExplainer agree, and the figures are reported."""
    need("shap")
    path, x = models["xgb_binary"]
    rows = write_csv(tmp_path / "rows.csv", np.nan_to_num(x[:90]))
    r = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "bench",
                                                     "interventional_cpu_compare.py"),
                        "--model", path, "--csv", str(rows), "--rows", "40", "--background", "30",
                        "--threads", "2", "--repeats", "1"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout.splitlines()[0])
    assert result["rows"] == 40 and result["background"] == 30 and result["threads"] == 2
    assert result["max_rel_diff"] <= 1e-4
    assert result["grove_rows_s"] > 0 and result["shap_rows_s"] > 0


def test_residuals_match_a_recomputation(models):
    path, x = models["xgb_multi"]
    model = groveml.Model(path)
    k = model.num_outputs
    for kwargs, kind in (({}, "margin"), ({"interactions": True}, "margin"),
                         ({"background": x[30:50], "output_space": "probability"}, "prediction"),
                         ({"attribution": "banzhaf"}, "margin")):
        got = model.explain(x[:20], residuals=True, **kwargs)
        assert isinstance(got, groveml.Explanation)
        plain = model.explain(x[:20], **kwargs)
        assert_bitwise(got.values, plain, str(kwargs))
        outputs = np.asarray(model.predict(x[:20], kind=kind), np.float64).reshape(20, k)
        sums = np.asarray(plain, np.float32).reshape(20, k, -1).astype(np.float64).sum(axis=2)
        assert got.residuals.shape == (20, k)
        np.testing.assert_allclose(got.residuals, sums - outputs, rtol=1e-6, atol=1e-6)
        assert "sum in double" in got.arithmetic
        if kwargs.get("attribution") == "banzhaf":
            assert np.abs(got.residuals).max() > 1e-4, "Banzhaf values are not additive"
        else:
            assert np.abs(got.residuals).max() < 1e-4, str(kwargs)
    with pytest.raises(ValueError, match="top_k"):
        model.explain(x[:3], top_k=2, residuals=True)


def test_saabas_matches_cli_and_xgboost(cli, models, tmp_path):
    path, x = models["xgb_multi"]
    model = groveml.Model(path)
    x_path = write_csv(tmp_path / "x.csv", x[:30])
    want = run_cli(cli, ["explain", "--attribution", "saabas"], path, x_path)
    got = model.explain(x[:30], attribution="saabas")
    assert_bitwise(got.reshape(want.shape), want, "saabas")
    # XGBoost's approx_contribs, within its float32 node means.
    xgb = need("xgboost")
    booster = xgb.Booster(model_file=path)
    ref = booster.predict(xgb.DMatrix(x[:30]), pred_contribs=True, approx_contribs=True)
    np.testing.assert_allclose(np.asarray(got).reshape(ref.shape), ref, rtol=1e-5, atol=1e-5)
    # Additive, unlike Banzhaf values; path-dependent values only.
    assert np.abs(model.explain(x[:30], attribution="saabas", residuals=True).residuals).max() < 1e-4
    with pytest.raises(ValueError, match="no interaction values"):
        model.explain(x[:3], attribution="saabas", interactions=True)
    with pytest.raises(ValueError, match="path-dependent only"):
        model.explain(x[:3], attribution="saabas", background=x[30:40])
    # A Model's own background leaves Saabas attributions path-dependent.
    with_background = groveml.Model(path, background=x[30:40])
    assert_bitwise(with_background.explain(x[:30], attribution="saabas"), got, "saabas, Model background")


def test_banzhaf_matches_cli(cli, models, tmp_path):
    path, x = models["xgb_multi"]
    model = groveml.Model(path)
    x_path = write_csv(tmp_path / "x.csv", x[:30])
    bg = x[30:50]
    bg_path = write_csv(tmp_path / "bg.csv", bg)
    want = run_cli(cli, ["explain", "--attribution", "banzhaf"], path, x_path)
    got = model.explain(x[:30], attribution="banzhaf")
    assert_bitwise(got.reshape(want.shape), want, "banzhaf")
    # Banzhaf values are not SHAP values (and do not sum to the margin).
    assert not np.allclose(got, model.explain(x[:30]))
    want = run_cli(cli, ["explain", "--attribution", "banzhaf", "--interactions"], path, x_path)
    got = model.explain(x[:30], attribution="banzhaf", interactions=True)
    assert_bitwise(got.reshape(want.shape), want, "banzhaf interactions")
    want = run_cli(cli, ["explain", "--attribution", "banzhaf", "--background", bg_path], path,
                   x_path)
    got = model.explain(x[:30], attribution="banzhaf", background=bg)
    assert_bitwise(got.reshape(want.shape), want, "interventional banzhaf")
    with pytest.raises(ValueError, match="attribution"):
        model.explain(x[:3], attribution="owen")


def test_pandas_columns_by_name(models):
    pd = need("pandas")
    path, x = models["xgb_binary"]
    model = groveml.Model(path)
    df = pd.DataFrame(x, columns=model.feature_names, index=np.arange(len(x)) * 10)
    shuffled = df[list(reversed(model.feature_names))].assign(label=1.0, id="x")
    want = model.explain(x)
    got = model.explain(shuffled)
    assert isinstance(got, pd.DataFrame)
    assert list(got.columns) == model.feature_names + ["bias"]
    assert (got.index == df.index).all()
    assert_bitwise(got.to_numpy(), want)
    assert_bitwise(model.explain(shuffled, output_format="numpy"), want)
    got.columns.name = "renamed"  # a result's columns are its own
    assert model.explain(shuffled).columns.name is None
    pred = model.predict(shuffled)
    assert list(pred.columns) == ["prediction"]
    assert_bitwise(pred.to_numpy()[:, 0], model.predict(x))
    # float32 columns stay float32; nullable columns with NA are missing values
    assert model.rows(df.astype(np.float32)).values.dtype == np.float32
    nullable = df.astype("Float64")
    nullable.iloc[0, 0] = pd.NA
    expect = x.copy()
    expect[0, 0] = np.nan
    assert_bitwise(model.explain(nullable, output_format="numpy"), model.explain(expect))


def test_pandas_multioutput_and_interaction_names(models):
    pd = need("pandas")
    path, x = models["xgb_multi"]
    model = groveml.Model(path)
    df = pd.DataFrame(x, columns=model.feature_names)
    got = model.explain(df)
    assert got.columns[0] == "out0.f0" and got.columns[-1] == "out2.bias"
    inter = model.explain(df.head(3), interactions=True)
    assert inter.shape == (3, 3 * 7 * 7) and inter.columns[1] == "out0.f0*f1"


def test_categoricals_xgboost(categorical_frames, tmp_path):
    xgb = need("xgboost")
    pd = need("pandas")
    df, y = categorical_frames
    reg = xgb.XGBRegressor(n_estimators=8, max_depth=4, enable_categorical=True,
                           tree_method="hist", max_cat_to_onehot=1, n_jobs=1)
    reg.fit(df, y)
    path = str(tmp_path / "cat.json")
    reg.save_model(path)
    model = groveml.Model(path)
    assert model.categories["color"] == list(df["color"].cat.categories)
    # The categories in another order and a missing one: recoded to the model's codes, as
    # XGBoost recodes them.
    test = df.head(50).copy()
    test["color"] = test["color"].cat.reorder_categories(["teal", "red", "blue", "green"])
    test.loc[test.index[:3], "color"] = np.nan
    want = reg.get_booster().predict(xgb.DMatrix(test, enable_categorical=True),
                                     pred_contribs=True)
    got = model.explain(test[list(reversed(test.columns))], output_format="numpy")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # Strings for a categorical feature map through the model's categories too.
    as_text = test.assign(color=test["color"].astype(object))
    assert_bitwise(model.explain(as_text, output_format="numpy"), got)
    codes = model.rows(test).values[:, 1]
    assert np.isnan(codes[:3]).all()
    assert (codes[3:] == df["color"].cat.categories.get_indexer(test["color"][3:])).all()
    # The same model saved as UBJSON: the same categories (read by the C++ loader), the same values.
    ubj = str(tmp_path / "cat.ubj")
    reg.save_model(ubj)
    model_ubj = groveml.Model(ubj)
    assert model_ubj.format == "xgboost-ubjson"
    assert model_ubj.categories == model.categories
    assert_bitwise(model_ubj.explain(test, output_format="numpy"),
                   model.explain(test, output_format="numpy"))


def test_categoricals_lightgbm(categorical_frames, tmp_path):
    lgb = need("lightgbm")
    df, y = categorical_frames
    booster = lgb.train({"objective": "regression", "num_leaves": 8, "verbose": -1,
                         "num_threads": 1, "min_data_in_leaf": 5, "cat_smooth": 1,
                         "min_data_per_group": 5}, lgb.Dataset(df, label=y), num_boost_round=10)
    path = str(tmp_path / "cat.txt")
    booster.save_model(path)
    model = groveml.Model(path)
    assert model.categories == {"color": list(df["color"].cat.categories),
                                "size": list(df["size"].cat.categories)}
    test = df.head(60).copy()
    test["size"] = test["size"].cat.reorder_categories([7, 5, 3])
    want = booster.predict(test, pred_contrib=True)
    got = model.explain(test, output_format="numpy")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_arrow_nulls_and_dictionaries(models, categorical_frames, tmp_path):
    pa = need("pyarrow")
    path, x = models["lgb_reg"]
    model = groveml.Model(path)
    columns = {n: pa.array([None if np.isnan(v) else float(v) for v in x[:, j]], pa.float64())
               for j, n in enumerate(model.feature_names)}
    table = pa.table(dict(reversed(list(columns.items()))) | {"note": pa.array(["a"] * len(x))})
    assert table.column("age").null_count > 0
    want = model.explain(x)
    got = model.explain(table)  # Arrow in, Arrow out
    assert isinstance(got, pa.Table) and got.schema.names == model.feature_names + ["bias"]
    assert_bitwise(np.column_stack([c.to_numpy() for c in got.columns]), want)
    assert_bitwise(model.explain(table.to_batches()[0], output_format="numpy"), want)
    assert model.predict(table).schema.names == ["prediction"]
    top = model.explain(table, top_k=2)
    assert top.schema.names == ["top1", "top1_value", "top2", "top2_value"]
    ints = pa.table({n: pa.array([None] + list(range(len(x) - 1)), pa.int32())
                     for n in model.feature_names})
    expect = np.array([np.nan] + list(range(len(x) - 1)), dtype=np.float64)
    assert_bitwise(model.predict(ints, output_format="numpy"),
                   model.predict(np.repeat(expect[:, None], 6, axis=1)))
    # A dictionary column is a categorical.
    xgb = need("xgboost")
    df, y = categorical_frames
    reg = xgb.XGBRegressor(n_estimators=4, enable_categorical=True, tree_method="hist", n_jobs=1)
    reg.fit(df, y)
    reg.save_model(str(tmp_path / "cat.json"))
    cat_model = groveml.Model(str(tmp_path / "cat.json"))
    arrow = pa.Table.from_pandas(df.head(20), preserve_index=False)
    assert pa.types.is_dictionary(arrow.schema.field("color").type)
    assert_bitwise(cat_model.explain(arrow, output_format="numpy"),
                   cat_model.explain(df.head(20), output_format="numpy"))


def test_bad_input_is_a_clear_error(models):
    pd = need("pandas")
    pa = need("pyarrow")
    path, x = models["xgb_binary"]
    model = groveml.Model(path)
    df = pd.DataFrame(x, columns=model.feature_names)
    with pytest.raises(ValueError, match=r"lacks the model's features \['debt'\].*'dept'"):
        model.explain(df.rename(columns={"debt": "dept"}))
    with pytest.raises(TypeError, match="column 'income' has dtype (object|str)"):
        model.explain(df.assign(income="high"))
    with pytest.raises(ValueError, match="more than once"):
        model.explain(pd.concat([df, df[["age"]]], axis=1))
    with pytest.raises(ValueError, match="X has 5 columns, the model has 6 features"):
        model.explain(x[:, :5])
    with pytest.raises(ValueError, match="one row of 5 values"):
        model.explain(x[0, :5])
    with pytest.raises(ValueError, match="2-D"):
        model.explain(x[None])
    with pytest.raises(ValueError, match=r"lacks the model's features \['rate'\]"):
        model.predict({n: 1.0 for n in model.feature_names[:-1]})
    with pytest.raises(TypeError, match="dict of one row"):
        model.predict({n: [1.0, 2.0] for n in model.feature_names})
    with pytest.raises(TypeError, match="dtype"):
        model.explain(np.array([["a"] * 6]))
    with pytest.raises(TypeError, match="Arrow type string"):
        model.explain(pa.table({n: pa.array(["1"]) for n in model.feature_names}))
    with pytest.raises(ValueError, match="kind must be"):
        model.predict(x, kind="proba")
    with pytest.raises(ValueError, match="needs a background"):
        model.explain(x, method="interventional")
    with pytest.raises(ValueError, match="needs method='interventional'"):
        model.explain(x, output_space="probability")
    with pytest.raises(ValueError, match="iteration"):
        model.explain(x, iteration_range=(5, 500))
    with pytest.raises(ValueError, match="background has 3 columns"):
        model.explain(x, background=x[:, :3].copy())
    with pytest.raises(FileNotFoundError):
        groveml.Model(os.path.join(os.path.dirname(path), "no_such_model.json"))
    with pytest.raises(ValueError, match="device must be"):
        groveml.Model(path, device="tpu")


def test_cuda_device_refused_without_gpu(models):
    path, _ = models["xgb_binary"]
    if groveml.has_cuda and groveml.visible_gpus() > 0:
        assert groveml.Model(path, device="cuda").describe()["predict_engine"] != "cpu"
        return
    with pytest.raises(RuntimeError, match="device='cuda'"):
        groveml.Model(path, device="cuda")


def test_shap_explanation_and_plots(models, tmp_path):
    shap = need("shap")
    matplotlib = need("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    path, x = models["xgb_binary"]
    model = groveml.Model(path)
    ex = model.explain(x, output_format="shap")
    assert isinstance(ex, shap.Explanation)
    assert ex.values.shape == (len(x), 6) and ex.base_values.shape == (len(x),)
    assert ex.feature_names == model.feature_names
    margins = model.predict(x, kind="margin")
    np.testing.assert_allclose(ex.values.sum(axis=1) + ex.base_values, margins, rtol=1e-5,
                               atol=1e-5)
    for name, plot in (("waterfall", lambda: shap.plots.waterfall(ex[0], show=False)),
                       ("beeswarm", lambda: shap.plots.beeswarm(ex, show=False)),
                       ("scatter", lambda: shap.plots.scatter(ex[:, "income"], show=False))):
        plt.figure()
        plot()
        png = tmp_path / f"{name}.png"
        plt.savefig(png)
        plt.close("all")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    multi = groveml.Model(models["xgb_multi"][0]).explain(x[:5], output_format="shap")
    assert multi.values.shape == (5, 6, 3) and multi.base_values.shape == (5, 3)


def test_top_k(models):
    pd = need("pandas")
    path, x = models["xgb_multi"]
    model = groveml.Model(path)
    values = model.explain(x)
    top = model.explain(x, top_k=2)
    assert top.features.shape == (len(x), 3, 2)
    phi = values[:, :, :-1]
    order = np.argsort(-np.abs(phi), axis=-1, kind="stable")[:, :, :2]
    assert (top.features == order).all()
    assert_bitwise(top.values, np.take_along_axis(phi, order, axis=-1))
    assert top.names[0, 0, 0] == model.feature_names[order[0, 0, 0]]
    frame = model.explain(pd.DataFrame(x, columns=model.feature_names), top_k=1)
    assert list(frame.columns) == ["out0.top1", "out0.top1_value", "out1.top1", "out1.top1_value",
                                   "out2.top1", "out2.top1_value"]
    # top-k ranks SHAP values: with interactions (whose values it would drop) it is refused,
    # and k is a count of at least 1.
    with pytest.raises(ValueError, match="each in its own call"):
        model.explain(x[:10], interactions=True, top_k=2)
    with pytest.raises(ValueError, match="at least 1"):
        model.explain(x[:10], top_k=0)
    with pytest.raises(TypeError, match="integer"):
        model.explain(x[:10], top_k=1.5)


def test_concurrent_calls_release_the_gil(models):
    path, x = models["xgb_binary"]
    model = groveml.Model(path, threads=1)
    big = np.tile(x, (200, 1))
    want = model.explain(big[:1000])
    start = time.perf_counter()
    model.explain(big)
    duration = time.perf_counter() - start
    reps = max(1, int(np.ceil(0.5 / max(duration, 1e-3))))
    results = []

    def work():
        for _ in range(reps):
            results.append(model.explain(big)[:1000])

    thread = threading.Thread(target=work)
    ticks = 0
    thread.start()
    while thread.is_alive():
        ticks += 1  # runs only while the engines do not hold the GIL
        time.sleep(0.002)
    thread.join()
    assert ticks >= 20, f"the main thread ran {ticks} times in {reps * duration:.2f} s"
    for r in results:
        assert_bitwise(r, want)


def test_progress_and_describe(models, capsys):
    path, x = models["lgb_reg"]
    model = groveml.Model(path)
    model.explain(x, progress=True)
    assert "explain" in capsys.readouterr().err
    info = model.describe()
    assert info["format"] == "lightgbm-text" and info["features"] == "6"
    assert "predict_engine" in info and "explain_engine" in info
    with open(path, "rb") as f:
        same = groveml.Model.from_bytes(f.read())
    assert_bitwise(same.explain(x), model.explain(x))


def _assert_same_model(got, want, x, what):
    """Predictions (every kind) and SHAP values of two Models equal bit for bit on x."""
    assert got.feature_names == want.feature_names and got.categories == want.categories
    for kind in ("prediction", "margin", "leaf"):
        assert_bitwise(got.predict(x, kind=kind, output_format="numpy"),
                       want.predict(x, kind=kind, output_format="numpy"), f"{what} {kind}")
    assert_bitwise(got.explain(x, output_format="numpy"), want.explain(x, output_format="numpy"),
                   f"{what} explain")


def test_from_booster_equals_the_saved_file(categorical_frames, models, tmp_path):
    xgb = need("xgboost")
    lgb = need("lightgbm")
    df, y = categorical_frames
    test = df.head(80)
    clf = xgb.XGBClassifier(n_estimators=6, max_depth=3, enable_categorical=True,
                            tree_method="hist", n_jobs=1).fit(df, y > y.mean())
    reg = lgb.LGBMRegressor(n_estimators=8, num_leaves=8, min_child_samples=5, verbose=-1,
                            n_jobs=1).fit(df, y)
    cases = [(clf, clf.get_booster(), ("json", "ubj")), (reg, reg.booster_, ("txt",))]
    for wrapper, booster, suffixes in cases:
        for obj in (wrapper, booster):
            live = groveml.Model.from_booster(obj)
            assert type(obj).__name__ in live.path and live.categories
            for suffix in suffixes:
                path = str(tmp_path / f"{type(booster).__module__}.{suffix}")
                booster.save_model(path)
                _assert_same_model(live, groveml.Model(path), test, f"{type(obj).__name__} {suffix}")
    # A Booster trained without a DataFrame (no categories), multi-output.
    path, x = models["xgb_multi"]
    booster = xgb.Booster(model_file=path)
    _assert_same_model(groveml.Model.from_booster(booster), groveml.Model(path), x, "xgb multi")
    # Refusals say what to call instead.
    with pytest.raises(TypeError, match="from_booster"):
        groveml.Model(booster)
    with pytest.raises(TypeError, match="for a model file use groveml.Model"):
        groveml.Model.from_booster(path)
    with pytest.raises(ValueError, match="fit"):  # the library's own NotFittedError
        groveml.Model.from_booster(xgb.XGBRegressor())
    with pytest.raises(ValueError, match="fit"):
        groveml.Model.from_booster(lgb.LGBMClassifier())


def test_optional_libraries_stay_unimported(models):
    """A model file and numpy rows import neither the model libraries nor pandas / pyarrow."""
    import subprocess
    import sys
    path, _ = models["xgb_binary"]
    code = ("import sys, numpy as np, groveml\n"
            f"m = groveml.Model({path!r})\n"
            "m.explain(np.zeros((2, m.num_features))); m.predict(np.zeros(m.num_features))\n"
            "loaded = [n for n in ('xgboost', 'lightgbm', 'pandas', 'pyarrow', 'shap')"
            " if n in sys.modules]\n"
            "assert not loaded, loaded\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_pickle_round_trip_is_bit_identical(models, categorical_frames, tmp_path):
    import pickle
    xgb = need("xgboost")
    df, y = categorical_frames
    path, x = models["lgb_reg"]
    copy = tmp_path / "copy.txt"
    copy.write_bytes(open(path, "rb").read())
    reg = xgb.XGBRegressor(n_estimators=5, enable_categorical=True, tree_method="hist",
                           n_jobs=1).fit(df, y)
    cases = [(groveml.Model(str(copy), threads=2, strategy="cpu", background=x[:20]), x),
             (groveml.Model(models["xgb_multi"][0]), x),
             (groveml.Model.from_booster(reg), df.head(50))]
    picklers = [pickle]
    try:
        import cloudpickle
        picklers.append(cloudpickle)
    except ImportError:
        pass
    for model, rows in cases:
        for pickler in picklers:
            back = pickle.loads(pickler.dumps(model))
            assert (back.path, back.device, back.threads, back.strategy, back.format) == (
                model.path, model.device, model.threads, model.strategy, model.format)
            _assert_same_model(back, model, rows, f"{model.path} {pickler.__name__}")
    # Re-created from the bytes it was built from, not from the file.
    model = cases[0][0]
    data = pickle.dumps(model)
    copy.write_bytes(b"not a model any more")
    back = pickle.loads(data)
    assert_bitwise(back.explain(x), model.explain(x))
    assert_bitwise(back.explain(x[:10]), model.explain(x[:10], background=x[:20]))  # its default


def test_single_rows(models, categorical_frames, tmp_path):
    pd = need("pandas")
    xgb = need("xgboost")
    path, x = models["xgb_binary"]
    model = groveml.Model(path)
    df = pd.DataFrame(x[:5], columns=model.feature_names)
    want = model.explain(x[3:4])
    for row in (x[3], df.iloc[3], df.iloc[3][::-1], df.assign(label=1.0).iloc[3],
                dict(df.iloc[3]), {**df.iloc[3].to_dict(), "customer": "c-17"}):
        got = model.explain(row, output_format="numpy")
        assert_bitwise(got, want, type(row).__name__)
        assert_bitwise(model.predict(row, output_format="numpy"), model.predict(x[3:4]))
    series_out = model.explain(df.iloc[3])
    assert isinstance(series_out, pd.DataFrame) and list(series_out.index) == [3]
    assert model.predict(x[3]).shape == (1,)
    missing = {**df.iloc[3].to_dict(), "age": None}
    expect = x[3:4].copy()
    expect[0, 0] = np.nan
    assert_bitwise(model.explain(missing), model.explain(expect))
    # A categorical feature's label in a dict or an object Series, as in a DataFrame.
    cats, y = categorical_frames
    numeric_cats = groveml.Model.from_booster(xgb.XGBRegressor(
        n_estimators=3, enable_categorical=True, tree_method="hist", n_jobs=1).fit(cats, y))
    # `size` has numeric categories: in one row a number would be a label or a code: refused.
    with pytest.raises(TypeError, match="'size'.*numbers"):
        numeric_cats.explain({**cats.iloc[0].to_dict(), "size": 5})
    cats = cats.drop(columns="size")
    reg = xgb.XGBRegressor(n_estimators=5, enable_categorical=True, tree_method="hist",
                           n_jobs=1).fit(cats, y)
    cat_model = groveml.Model.from_booster(reg)
    frame = cats.head(6)
    for i in range(len(frame)):
        record = {k: (v.item() if hasattr(v, "item") else v)
                  for k, v in frame.iloc[i].to_dict().items()}
        want = cat_model.explain(frame.iloc[i:i + 1], output_format="numpy")
        assert_bitwise(cat_model.explain(record), want, f"record {i}")
        assert_bitwise(cat_model.explain(frame.iloc[i], output_format="numpy"), want, f"row {i}")
    with pytest.raises(TypeError, match="'num'"):
        cat_model.explain({**record, "num": "high"})


def test_frames_of_every_column_type_match_numpy(models):
    """Frames converted in one step (numbers, booleans only) and column by column (nullable,
    mixed) give the rows numpy gives; a column list seen before is not trusted for new dtypes."""
    pd = need("pandas")
    path, x = models["lgb_reg"]
    model = groveml.Model(path)
    names = model.feature_names
    x = np.nan_to_num(x[:40])
    x[:, 1] = np.round(x[:, 1] * 10)
    x[:, 2] = x[:, 2] > 0
    base = pd.DataFrame(x, columns=names)
    frames = {
        "float64": base,
        "float32": base.astype(np.float32),
        "int and bool": base.astype({"income": np.int64, "debt": bool}),
        "reordered with extras": base[names[::-1]].assign(label=1, note="x"),
        "numeric extras after the features": base.assign(label=1.0, weight=2),
        "nullable": base.astype({"income": "Int64", "debt": "boolean", "age": "Float64"}),
    }
    for what, frame in frames.items():
        want = x.astype(np.float32) if what == "float32" else x
        assert_bitwise(model.explain(frame, output_format="numpy"), model.explain(want), what)
        assert model.rows(frame).values.dtype == (np.float32 if what == "float32" else np.float64)
    shared = base.copy()
    shared["debt"] = np.where(x[:, 2] > 0, "yes", "no")
    with pytest.raises(TypeError, match="column 'debt' has dtype"):
        model.explain(shared)  # the columns of a frame seen before, but one holds strings


def test_shap_data_holds_the_original_values(categorical_frames, tmp_path):
    """Explanation.data holds category labels and booleans as shap's TreeExplainer puts them
    there, so that shap's plots label the values as shap labels them."""
    shap = need("shap")
    xgb = need("xgboost")
    matplotlib = need("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cats, y = categorical_frames
    df = cats.assign(flag=cats["num"] > 0)[["num", "color", "flag", "other"]]
    reg = xgb.XGBRegressor(n_estimators=6, enable_categorical=True, tree_method="hist",
                           n_jobs=1).fit(df, y)
    model = groveml.Model.from_booster(reg)
    rows = df.head(20)
    ours = model.explain(rows, output_format="shap")
    theirs = shap.TreeExplainer(reg)(rows)
    assert ours.data.dtype == object and list(ours.data[0]) == list(theirs.data[0])
    assert (ours.data == theirs.data).all()
    np.testing.assert_allclose(ours.values, theirs.values, rtol=1e-4, atol=1e-4)

    def labels(explanation):
        plt.figure()
        shap.plots.waterfall(explanation[0], show=False)
        ax = plt.gca()
        plt.gcf().canvas.draw()
        text = [t.get_text() for t in ax.get_yticklabels()]
        plt.close("all")
        return text

    ours_labels = labels(ours)
    assert ours_labels == labels(theirs)
    assert f"{rows['color'].iloc[0]} = color" in ours_labels, ours_labels
    # One row (a dict) keeps its labels too.
    record = {k: (v.item() if hasattr(v, "item") else v) for k, v in rows.iloc[0].items()}
    assert list(model.explain(record, output_format="shap").data[0]) == list(theirs.data[0])


def _interventional_group_values(model, x, bg, groups):
    """Shapley values of the game over `groups` by their definition: v(T) = mean over the
    background of the margin of the hybrid taking T's members from the row."""
    import math
    resolved = model.groups(groups)
    G = len(resolved)
    out = []
    for row in x:
        v = []
        for T in range(1 << G):
            hybrid = bg.copy()
            for g, (_, members) in enumerate(resolved):
                if (T >> g) & 1:
                    hybrid[:, members] = row[members]
            v.append(model.predict(hybrid, kind="margin").astype(np.float64).mean())
        phi = []
        for i in range(G):
            total = 0.0
            for S in range(1 << G):
                if (S >> i) & 1:
                    continue
                size = bin(S).count("1")
                w = math.factorial(size) * math.factorial(G - size - 1) / math.factorial(G)
                total += w * (v[S | (1 << i)] - v[S])
            phi.append(total)
        out.append(phi + [v[0]])
    return np.array(out)


def test_feature_groups(models):
    pd = need("pandas")
    path, x = models["xgb_binary"]
    model = groveml.Model(path)
    groups = {"money": ["income", "debt", 5], "history": ["score", "tenure"]}
    assert model.groups(groups) == [("age", [0]), ("money", [1, 2, 5]), ("history", [3, 4])]
    got = model.explain(x[:6], groups=groups, background=x[40:48])
    np.testing.assert_allclose(got, _interventional_group_values(model, x[:6], x[40:48], groups),
                               rtol=1e-5, atol=1e-5)
    # Path-dependent: additive, and one group of everything takes the whole difference.
    values = model.explain(x[:20], groups=groups)
    assert values.shape == (20, 4)
    np.testing.assert_allclose(values.sum(axis=1), model.predict(x[:20], kind="margin"),
                               rtol=1e-5, atol=1e-5)
    whole = model.explain(x[:20], groups={"all": list(range(6))})
    np.testing.assert_allclose(whole[:, 0], model.explain(x[:20])[:, :6].sum(axis=1),
                               rtol=1e-5, atol=1e-5)
    # Every feature its own group: the ungrouped values, bit for bit.
    singletons = {name: [name] for name in model.feature_names}
    assert_bitwise(model.explain(x[:20], groups=singletons), model.explain(x[:20]))
    assert_bitwise(model.explain(x[:5], groups=singletons, interactions=True),
                   model.explain(x[:5], interactions=True))
    # Frames name the groups; deterministic run to run.
    df = model.explain(pd.DataFrame(x[:5], columns=model.feature_names), groups=groups)
    assert list(df.columns) == ["age", "money", "history", "bias"]
    assert_bitwise(model.explain(x[:50], groups=groups, attribution="banzhaf"),
                   model.explain(x[:50], groups=groups, attribution="banzhaf"))
    with pytest.raises(ValueError, match="is in group \"history\" and in group \"money\""):
        model.explain(x[:2], groups={"money": ["income", "score"], "history": ["score"]})
    with pytest.raises(ValueError, match="not a feature of the model"):
        model.explain(x[:2], groups={"g": ["nope"]})
    # Members are names or integers (numpy's too), for in-process and served models alike: the
    # server's JSON rule refuses 3.0, so does every groveml path.
    assert model.groups({"g": [np.int64(1), np.int32(2)]}) == model.groups({"g": [1, 2]})
    for bad in (3.0, True, None):
        with pytest.raises(ValueError, match="neither a feature name nor a feature index"):
            model.groups({"g": [1, bad]})
        with pytest.raises(ValueError, match="neither a feature name nor a feature index"):
            groveml._groups.group_members({"g": [1, bad]})

"""Category names through every interface give one answer, the library's: a frame holding a subset
of the model's categories in another order (its own codes name other categories) is predicted by
XGBoost / LightGBM on the pandas frame, groveml.Model in process, groveml.Client, the `grove` CLI
from the CSV pandas.to_csv writes (--header; local and --server), grove.v1 Predict with
Matrix.category_columns, groveml.predict_dask, and groved's KServe v2 through tritonclient over
gRPC and REST (one input per feature: the categorical ones as BYTES category names, JSON and
binary). An unknown category is what the library makes of it, in every interface: missing for
LightGBM, an error for XGBoost."""

import os
import subprocess

import numpy as np
import pytest
from conftest import assert_bitwise, need, need_binary

import groveml
import groveml._input

FEATURES = ["num", "color", "size", "other"]


@pytest.fixture(scope="module")
def served(categorical_models, tmp_path_factory):
    need("grpc")
    import groved_harness as h
    groved = need_binary("GROVED")
    repo = tmp_path_factory.mktemp("repo")
    for name, path in categorical_models.items():
        h.install_model(str(repo), name, 1, path)
    with h.Groved(groved, str(repo)) as g:
        client = groveml.Client(g.target, timeout=60)
        h.wait_ready(lambda: all(dict(client.list_models()).get(n) for n in categorical_models))
        yield g, client
        client.close()


def subset_frame(categorical_frames):
    """40 rows whose categories are a subset of the model's, in another order, plus an id column
    (not a feature) and the features in another order than the model's."""
    pd = need("pandas")
    df, _ = categorical_frames
    test = df[df["color"].isin(["green", "teal"]) & df["size"].isin([7, 3])].head(40).copy()
    test["color"] = pd.Categorical(test["color"].astype(str), categories=["teal", "green"])
    test["size"] = pd.Categorical(test["size"].astype(int), categories=[7, 3])
    test.loc[test.index[3], "color"] = np.nan  # a missing category
    test.insert(0, "id", np.arange(len(test)))
    return test[["id", "other", "size", "color", "num"]]


def library_predict(name, path, frame):
    if name.startswith("xgb"):
        xgb = need("xgboost")
        return xgb.Booster(model_file=path).inplace_predict(frame[FEATURES])
    lgb = need("lightgbm")
    return lgb.Booster(model_file=path).predict(frame[FEATURES])


def cli_predict(cli, path, frame, tmp_path, server=None):
    """`grove predict --header` on the CSV pandas writes: local with `path`, or remote with
    `server` (the served model named `path`, its categories from the server's metadata)."""
    csv = tmp_path / "frame.csv"
    frame.to_csv(csv, index=False)
    remote = ["--server", server] if server else []
    r = subprocess.run([cli, "predict", "--header", "--model", path, "--input", str(csv),
                        "--no-progress"] + remote, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    return np.array([float(v) for v in r.stdout.split()[1:]], dtype=np.float32)


def kserve_inputs(module, frame, binary=True):
    """One input per feature: category names as BYTES ("" for a missing one), numbers as FP64."""
    inputs = []
    for name in FEATURES:
        column = frame[name]
        if str(column.dtype) == "category":
            values = np.array(["" if v != v else str(v) for v in column.astype(object)],
                              dtype=np.object_)
            t = module.InferInput(name, [len(frame)], "BYTES")
        else:
            values = column.to_numpy(dtype=np.float64)
            t = module.InferInput(name, [len(frame)], "FP64")
        if module.__name__.endswith("http"):
            t.set_data_from_numpy(values, binary_data=binary)
        else:
            t.set_data_from_numpy(values)
        inputs.append(t)
    return inputs


def kserve_predict(served, name, frame):
    """output__0 through tritonclient gRPC, REST binary and REST JSON (all three must agree)."""
    grpcclient = need("tritonclient.grpc")
    httpclient = need("tritonclient.http")
    g, _ = served
    got = []
    c = grpcclient.InferenceServerClient(url=g.target)
    got.append(c.infer(name, kserve_inputs(grpcclient, frame)).as_numpy("output__0"))
    h = httpclient.InferenceServerClient(url=f"127.0.0.1:{g.http_port}")
    for binary in (True, False):
        out = [httpclient.InferRequestedOutput("output__0", binary_data=binary)]
        got.append(h.infer(name, kserve_inputs(httpclient, frame, binary),
                           outputs=out).as_numpy("output__0"))
    for other in got[1:]:
        assert_bitwise(other, got[0], f"{name}: REST and gRPC")
    return got[0].reshape(-1)


def grove_v1_predict(served, name, frame):
    """grove.v1 Predict with the numeric columns in `values_f64` and the categorical ones as
    Matrix.category_columns (names; their numeric column NaN)."""
    import grpc
    from groveml._pb import grove_pb2, grove_pb2_grpc
    values = np.full((len(frame), len(FEATURES)), np.nan)
    rows = grove_pb2.Matrix(rows=len(frame), cols=len(FEATURES))
    for j, name_ in enumerate(FEATURES):
        column = frame[name_]
        if str(column.dtype) == "category":
            rows.category_columns.add(feature=name_, names=[
                b"" if v != v else str(v).encode() for v in column.astype(object)])
        else:
            values[:, j] = column.to_numpy(dtype=np.float64)
    rows.values_f64.extend(values.ravel())
    with grpc.insecure_channel(served[0].target) as channel:
        response = grove_pb2_grpc.GroveStub(channel).Predict(
            grove_pb2.PredictRequest(model=name, rows=rows, outputs=[grove_pb2.OUTPUT_PREDICTION]),
            timeout=60)
    return np.asarray(response.prediction.values, np.float32)


@pytest.mark.parametrize("name", ["xgb_cat", "lgb_cat"])
def test_one_answer_through_every_interface(served, categorical_models, categorical_frames, cli,
                                            tmp_path, name):
    path = categorical_models[name]
    frame = subset_frame(categorical_frames)
    want = np.asarray(library_predict(name, path, frame), dtype=np.float32)
    model = groveml.Model(path)
    got = np.asarray(model.predict(frame[FEATURES], output_format="numpy"),
                     dtype=np.float32).reshape(-1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    _, client = served
    assert_bitwise(np.asarray(client.predict(name, frame[FEATURES], output_format="numpy"),
                              dtype=np.float32).reshape(-1), got, f"{name}: Client")
    # The categories as strings (what Spark makes of them) and as Arrow strings: recoded alike,
    # for LightGBM too, whose model types no feature categorical.
    pa = need("pyarrow")
    strings = frame[FEATURES].assign(color=frame["color"].astype(object))
    for rows in (strings, pa.Table.from_pandas(strings, preserve_index=False)):
        for predict in (model.predict, lambda x, **kw: client.predict(name, x, **kw)):
            assert_bitwise(np.asarray(predict(rows, output_format="numpy"),
                                      dtype=np.float32).reshape(-1), got, f"{name}: strings")
    assert_bitwise(cli_predict(cli, path, frame, tmp_path), got, f"{name}: CLI")
    assert_bitwise(cli_predict(cli, name, frame, tmp_path, served[0].target), got,
                   f"{name}: CLI --server")
    assert_bitwise(kserve_predict(served, name, frame), got, f"{name}: KServe")
    assert_bitwise(grove_v1_predict(served, name, frame), got, f"{name}: grove.v1 names")
    # Dask partitions of the frame, and of its string form (Spark's), through groveml's helper.
    dd = need("dask.dataframe")
    for rows in (frame, frame.assign(color=frame["color"].astype(object))):
        out = groveml.predict_dask(dd.from_pandas(rows, npartitions=3), path).compute(
            scheduler="synchronous").sort_values("id")
        assert_bitwise(out["prediction"].to_numpy(np.float32), got, f"{name}: Dask")


def test_an_unknown_category_is_what_the_library_makes_of_it(served, categorical_models,
                                                             categorical_frames, cli, tmp_path):
    """LightGBM: missing (the row's prediction is the one with the category missing); XGBoost
    refuses it, and so do groved and the CLI, naming the feature and the value."""
    pd = need("pandas")
    frame = subset_frame(categorical_frames).head(4).copy()
    # "yellow" sorts after every known color: XGBoost 3.2 raises for it (one that sorts between two
    # known ones it takes for the next known one, a lookup without an equality check; Grove refuses
    # every unknown category of an XGBoost model, the library's documented rule).
    frame["color"] = pd.Categorical(["yellow", "teal", "yellow", np.nan])
    missing = frame.assign(color=pd.Categorical([np.nan, "teal", np.nan, np.nan]))
    path = categorical_models["lgb_cat"]
    want = np.asarray(library_predict("lgb_cat", path, frame), dtype=np.float32)
    assert_bitwise(want, np.asarray(library_predict("lgb_cat", path, missing), dtype=np.float32),
                   "LightGBM: unknown = missing")
    got = cli_predict(cli, path, frame, tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert_bitwise(kserve_predict(served, "lgb_cat", frame), got, "lgb_cat: KServe")
    _, client = served
    for predict in (groveml.Model(path).predict, lambda x: client.predict("lgb_cat", x)):
        assert_bitwise(np.asarray(predict(frame[FEATURES]), np.float32).reshape(-1), got,
                       "lgb_cat: groveml")

    path = categorical_models["xgb_cat"]
    with pytest.raises(Exception, match="not in the training set"):
        library_predict("xgb_cat", path, frame)
    with pytest.raises(RuntimeError, match="feature 'color': 'yellow' is not one of the 4"):
        cli_predict(cli, path, frame, tmp_path)
    for predict in (groveml.Model(path).predict, lambda x: client.predict("xgb_cat", x)):
        with pytest.raises(ValueError, match="feature 'color': 'yellow' is not one of the 4"):
            predict(frame[FEATURES])
    grpcclient = need("tritonclient.grpc")
    from tritonclient.utils import InferenceServerException
    c = grpcclient.InferenceServerClient(url=served[0].target)
    with pytest.raises(InferenceServerException, match="feature 'color': 'yellow' is not one"):
        c.infer("xgb_cat", kserve_inputs(grpcclient, frame))


def doc_blocks(path, title, language):
    """The fenced `language` blocks of the section of `path` whose heading is `title`."""
    import re
    text = open(path, encoding="utf-8").read()
    start = text.index(title)
    rest = text[start + len(title):]
    end = re.search(r"\n#{1,%d} " % (len(title) - len(title.lstrip("#"))), rest)
    section = rest[:end.start()] if end else rest
    return re.findall(r"```%s\n(.*?)```" % language, section, re.S)


def test_the_documented_examples(categorical_models, cli, tmp_path_factory):
    """docs/api.md "Category names" (its tritonclient and curl blocks, against a groved serving
    tests/model/data/categories/xgb.json as `cities`) and docs/formats.md "Inputs of grove" (its
    grove lines, on examples/cities.csv and a Parquet file) run as written and give XGBoost's numbers."""
    pd = need("pandas")
    xgb = need("xgboost")
    need("tritonclient.grpc")
    import groved_harness as h
    from conftest import SOURCE_DIR
    import json
    import os
    import shutil
    model = os.path.join(SOURCE_DIR, "tests", "model", "data", "categories", "xgb.json")
    booster = xgb.Booster(model_file=model)

    def library(city, x, size):
        frame = pd.DataFrame({"city": pd.Categorical(city), "x": np.asarray(x, np.float64),
                              "size": pd.Categorical(size)})
        return np.asarray(booster.inplace_predict(frame), np.float32)

    # formats.md: the CLI lines, run from the source directory with this build's grove.
    lines = [line for block in doc_blocks(os.path.join(SOURCE_DIR, "docs", "formats.md"),
                                          "## Inputs of `grove`", "sh")
             for line in block.splitlines() if line.strip()]
    assert len(lines) == 3
    rows = pd.read_csv(os.path.join(SOURCE_DIR, "examples", "cities.csv"))
    want = library(rows["city"].fillna("").replace("", np.nan).tolist(), rows["x"],
                   rows["size"].tolist())
    outputs = []
    for line in lines:
        args = line.split()
        assert args[0] == "build/cpu/bin/grove"
        r = subprocess.run([cli] + args[1:] + ["--no-progress"], cwd=SOURCE_DIR,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        outputs.append(r.stdout.splitlines())
    assert outputs[0][0] == "prediction"
    assert_bitwise(np.array([float(v) for v in outputs[0][1:]], np.float32), want, "CLI")
    assert outputs[1][0] == "top1_feature,top1_value,top2_feature,top2_value"
    assert len(outputs[1]) == len(rows) + 1
    # The Parquet line: what the same table as CSV (its twin, scripts/make_parquet_corpus.py)
    # gives, byte for byte, the ids kept.
    parquet = lines[2].split()[-1]
    twin = [cli] + args[1:-1] + [parquet[:-len(".parquet")] + ".csv", "--no-progress"]
    r = subprocess.run(twin, cwd=SOURCE_DIR, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert outputs[2][0] == "id,prediction"
    assert len(outputs[2]) == len(pd.read_parquet(os.path.join(SOURCE_DIR, parquet))) + 1
    assert outputs[2] == r.stdout.splitlines()

    # api.md: the tritonclient block and the curl block against a groved serving `cities`.
    repo = tmp_path_factory.mktemp("cities")
    h.install_model(str(repo), "cities", 1, model)
    groved = need_binary("GROVED")
    python_block, = doc_blocks(os.path.join(SOURCE_DIR, "docs", "api.md"),
                               "## Category names: one input per feature", "python")
    sh_block, = doc_blocks(os.path.join(SOURCE_DIR, "docs", "api.md"),
                           "## Category names: one input per feature", "sh")
    with h.Groved(groved, str(repo)) as g:
        client = groveml.Client(g.target, timeout=60)
        h.wait_ready(lambda: dict(client.list_models()).get("cities") is True)
        client.close()
        scope = {}
        exec(python_block.replace("localhost:8001", g.target).replace("print(", "(lambda *a: a)("),
             scope)
        assert_bitwise(scope["res"].as_numpy("output__0").reshape(-1),
                       library(["lyon", "paris", np.nan], [0.5, -1.25, np.nan], [10, 42, 3]),
                       "api.md tritonclient")
        if shutil.which("curl") is None:
            pytest.skip("curl is missing")
        r = subprocess.run(["sh", "-c", sh_block.replace("localhost:8000",
                                                          f"127.0.0.1:{g.http_port}")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        data = json.loads(r.stdout)["outputs"][0]["data"]
        assert_bitwise(np.array(data, np.float32),
                       library(["lyon", np.nan], [0.5, np.nan], [10, 42]), "api.md curl")


@pytest.mark.parametrize("name", ["xgb_cat", "lgb_cat"])
def test_top_k_from_names_local_and_remote(served, categorical_models, categorical_frames, cli,
                                           tmp_path, name):
    """`grove explain --top-k` on the CSV of category names: the same bytes locally and through
    groved, and each row's pairs are its largest |SHAP values| (groveml.Model's)."""
    frame = subset_frame(categorical_frames)
    csv = tmp_path / "frame.csv"
    frame.to_csv(csv, index=False)
    outs = []
    for where in ([], ["--server", served[0].target]):
        model = name if where else categorical_models[name]
        r = subprocess.run([cli, "explain", "--header", "--top-k", "2", "--model", model,
                            "--input", str(csv), "--no-progress"] + where,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1]
    lines = outs[0].splitlines()
    assert lines[0] == "top1_feature,top1_value,top2_feature,top2_value"
    shap = np.asarray(groveml.Model(categorical_models[name]).explain(
        frame[FEATURES], output_format="numpy"), np.float32)
    for line, values in zip(lines[1:], shap):
        f1, v1, f2, v2 = (float(x) for x in line.split(","))
        order = sorted(range(len(FEATURES)), key=lambda j: (-abs(values[j]), j))
        assert [int(f1), int(f2)] == order[:2]
        assert np.float32(v1) == values[int(f1)] and np.float32(v2) == values[int(f2)]


def test_catboost_one_hot_names_in_process():
    """CatBoost's one-hot features record hashes of their category names: groveml codes a frame's
    names through the engine (as groved and `grove` do) and answers CatBoost's predictions, unseen
    names included (they take every split's not-equal side); a served model's hashed feature is
    refused rather than answered from NaN."""
    pd = need("pandas")
    from conftest import SOURCE_DIR
    case = os.path.join(SOURCE_DIR, "tests", "golden", "cb_onehot_regression")
    model = groveml.Model(os.path.join(case, "catboost.json"), device="cpu")
    assert set(model.categories.hashed) == {"city", "size"}
    text = pd.read_csv(os.path.join(case, "X_names.csv"), dtype=str, keep_default_na=False)
    frame = text.copy()
    for column in ("x0", "x1", "x2"):
        frame[column] = text[column].replace("", "nan").astype(float)
    want = np.loadtxt(os.path.join(case, "pred.csv"), delimiter=",", ndmin=1)
    got = np.asarray(model.predict(frame), dtype=np.float32).reshape(-1)
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-5)
    # The same rows as the model's codes give the same answer.
    codes = np.loadtxt(os.path.join(case, "X.csv"), delimiter=",", ndmin=2, skiprows=0)
    assert_bitwise(np.asarray(model.predict(codes.astype(np.float32))).reshape(-1), got)
    # Without a coder (categories known neither from the engine nor from served hashes): refused,
    # not NaN.
    remote_like = groveml._input.Categories({"city": [], "size": []})
    with pytest.raises(TypeError, match="hashes of their names"):
        groveml._input.prepare(frame, model.feature_names, model.feature_types, remote_like)


def catboost_names(case):
    """X_names.csv of golden case `case` as the frame CatBoost predicted (names as text, the float
    columns as numbers) and pred.csv."""
    pd = need("pandas")
    text = pd.read_csv(os.path.join(case, "X_names.csv"), dtype=str, keep_default_na=False)
    frame = text.copy()
    for column in text.columns:
        if column.startswith("x"):
            frame[column] = text[column].replace("", "nan").astype(float)
    return frame, np.loadtxt(os.path.join(case, "pred.csv"), delimiter=",", ndmin=1)


def test_catboost_names_through_a_served_model(cli, tmp_path):
    """A served CatBoost model's hashed features (one-hot; CTRs and one-hot): its metadata lists
    their hashes, so groveml.Client codes a frame's names and `grove --server` a CSV's, giving
    CatBoost's predictions, unseen names included, as groveml.Model in process does."""
    need("grpc")
    import groved_harness as h
    from conftest import SOURCE_DIR
    groved = need_binary("GROVED")
    names = ["cb_onehot_regression", "cb_ctr_regression"]
    cases = {n: os.path.join(SOURCE_DIR, "tests", "golden", n) for n in names}
    repo = tmp_path / "repo"
    for n, case in cases.items():
        h.install_model(str(repo), n, 1, os.path.join(case, "catboost.json"))
    with h.Groved(groved, str(repo)) as g:
        client = groveml.Client(g.target, timeout=60)
        h.wait_ready(lambda: all(dict(client.list_models()).get(n) for n in names))
        for n, case in cases.items():
            frame, want = catboost_names(case)
            meta = client.metadata(n)
            assert all(len(c.hashes) for c in meta.categories), n
            got = np.asarray(client.predict(n, frame), dtype=np.float32).reshape(-1)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=n)
            local = groveml.Model(os.path.join(case, "catboost.json"), device="cpu")
            assert_bitwise(got, np.asarray(local.predict(frame), np.float32).reshape(-1))
            remote_cli = cli_predict(cli, n, frame, tmp_path, server=g.target)
            assert_bitwise(remote_cli, got)
        client.close()


def test_catboost_empty_and_missing_names(cli, tmp_path):
    """The empty name is a CatBoost category like any other: groveml in process and `grove` on
    the CSV (an empty cell) hash it alike; a missing value (None, NaN) in a hashed column is an
    error, as in CatBoost, never a NaN code."""
    pd = need("pandas")
    from conftest import SOURCE_DIR
    path = os.path.join(SOURCE_DIR, "tests", "golden", "cb_onehot_regression", "catboost.json")
    model = groveml.Model(path, device="cpu")
    frame = pd.DataFrame({"x0": [0.5, -1.0, 0.25], "city": ["", "tokyo", ""],
                          "x1": [1.0, 0.0, 2.0], "size": ["1", "", "4"], "x2": [0.0, 1.0, 1.5]})
    got = np.asarray(model.predict(frame), dtype=np.float32).reshape(-1)
    assert np.isfinite(got).all()
    assert_bitwise(cli_predict(cli, path, frame, tmp_path), got, "CLI")
    for missing in (None, np.nan):
        bad = frame.copy()
        bad["city"] = bad["city"].astype(object)
        bad.loc[1, "city"] = missing
        with pytest.raises(ValueError, match=r"feature 'city', row 1: a missing value"):
            model.predict(bad)

"""Category names through every interface give one answer, the library's: a frame holding a subset
of the model's categories in another order (its own codes name other categories) is predicted by
XGBoost / LightGBM on the pandas frame, groveml.Model in process, groveml.Client, the `grove` CLI
from the CSV pandas.to_csv writes (--header), and groved's KServe v2 through tritonclient over gRPC
and REST (one input per feature: the categorical ones as BYTES category names, JSON and binary).
An unknown category is what the library makes of it: missing for LightGBM, an error for XGBoost."""

import subprocess

import numpy as np
import pytest
from conftest import assert_bitwise, need, need_binary

import groveml

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


def cli_predict(cli, path, frame, tmp_path):
    csv = tmp_path / "frame.csv"
    frame.to_csv(csv, index=False)
    r = subprocess.run([cli, "predict", "--header", "--model", path, "--input", str(csv),
                        "--no-progress"], capture_output=True, text=True, timeout=300)
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
    assert_bitwise(cli_predict(cli, path, frame, tmp_path), got, f"{name}: CLI")
    assert_bitwise(kserve_predict(served, name, frame), got, f"{name}: KServe")


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

    path = categorical_models["xgb_cat"]
    with pytest.raises(Exception, match="not in the training set"):
        library_predict("xgb_cat", path, frame)
    with pytest.raises(RuntimeError, match="feature 'color': 'yellow' is not one of the 4"):
        cli_predict(cli, path, frame, tmp_path)
    grpcclient = need("tritonclient.grpc")
    from tritonclient.utils import InferenceServerException
    c = grpcclient.InferenceServerClient(url=served[0].target)
    with pytest.raises(InferenceServerException, match="feature 'color': 'yellow' is not one"):
        c.infer("xgb_cat", kserve_inputs(grpcclient, frame))

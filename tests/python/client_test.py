"""groveml.Client against a groved started here (loopback, ephemeral ports): the same numbers as
groveml.Model in-process (and so as the CLI) for numpy float64 / float32, pandas and Arrow rows,
predictions, interactions, top-k and interventional SHAP over the model's background; feature-name
checks against the model's metadata; categorical columns recoded by the model's categories, or
refused without them; tokens; server errors as grpc errors."""

import os
import shutil

import numpy as np
import pytest
from conftest import SOURCE_DIR, assert_bitwise, need, need_binary, write_csv

import groveml


@pytest.fixture(scope="module")
def server(models, categorical_models, tmp_path_factory):
    need("grpc")
    import groved_harness as h
    groved = need_binary("GROVED")
    repo = tmp_path_factory.mktemp("repo")
    for name in ("xgb_binary", "xgb_multi", "lgb_reg"):
        path, x = models[name]
        h.install_model(str(repo), name, 1, path)
    for name, path in categorical_models.items():
        h.install_model(str(repo), name, 1, path)
    # A categorical model trained without a DataFrame: its file records no categories.
    h.install_model(str(repo), "xgb_cat_plain", 1,
                    os.path.join(SOURCE_DIR, "tests", "golden", "xgb_categorical", "model.json"))
    write_csv(repo / "xgb_binary" / "background.csv", models["xgb_binary"][1][:40])
    tokens = repo.parent / "tokens"
    tokens.write_text("infer groveml-test-token-0123\n")
    with h.Groved(groved, str(repo), flags=[f"--auth_token_file={tokens}"]) as g:
        client = groveml.Client(g.target, token="groveml-test-token-0123", timeout=60)
        h.wait_ready(lambda: dict(client.list_models()).get("lgb_reg") is True)
        yield g, client
        client.close()


@pytest.mark.parametrize("name", ["xgb_binary", "xgb_multi", "lgb_reg"])
def test_same_as_in_process(server, models, name):
    _, client = server
    path, x = models[name]
    model = groveml.Model(path)
    assert client.feature_names(name) == model.feature_names
    assert_bitwise(client.explain(name, x), model.explain(x), f"{name} explain f64")
    x32 = x.astype(np.float32)
    assert_bitwise(client.explain(name, x32), model.explain(x32), f"{name} explain f32")
    for kind in ("prediction", "margin", "leaf"):
        assert_bitwise(np.asarray(client.predict(name, x, kind=kind), np.float32),
                       np.asarray(model.predict(x, kind=kind), np.float32), f"{name} {kind}")
    assert_bitwise(client.explain(name, x[:20], interactions=True),
                   model.explain(x[:20], interactions=True), f"{name} interactions")
    got, want = client.explain(name, x, top_k=3), model.explain(x, top_k=3)
    assert (got.features == want.features).all()
    assert_bitwise(got.values, want.values)
    assert_bitwise(got.bias, want.bias)
    remote = client.model(name)
    assert_bitwise(remote.explain(x[:7]), model.explain(x[:7]))


def test_interventional_over_the_servers_background(server, models):
    _, client = server
    path, x = models["xgb_binary"]
    model = groveml.Model(path, background=x[:40])
    for space in ("margin", "probability"):
        assert_bitwise(client.explain("xgb_binary", x[:50], method="interventional",
                                      output_space=space),
                       model.explain(x[:50], output_space=space), space)


def test_residuals_are_the_servers(server, models):
    _, client = server
    path, x = models["xgb_binary"]
    model = groveml.Model(path, background=x[:40])
    for kwargs in ({"method": "path_dependent"},
                   {"method": "interventional", "output_space": "probability"},
                   {"method": "path_dependent", "interactions": True},
                   {"method": "interventional", "interactions": True}):
        got = client.explain("xgb_binary", x[:30], residuals=True, **kwargs)
        want = model.explain(x[:30], residuals=True, **kwargs)
        assert isinstance(got, groveml.Explanation)
        assert_bitwise(got.values, want.values, str(kwargs))
        assert got.residuals.shape == (30,)
        # The server sums the values (interactions: their row sums) in its own order.
        np.testing.assert_allclose(got.residuals, want.residuals, rtol=0, atol=1e-6)
        assert got.arithmetic == want.arithmetic
    assert not isinstance(client.explain("xgb_binary", x[:3]), groveml.Explanation)


def test_banzhaf_values(server, models):
    _, client = server
    path, x = models["xgb_binary"]
    model = groveml.Model(path, background=x[:40])
    assert_bitwise(client.explain("xgb_binary", x[:50], attribution="banzhaf"),
                   model.explain(x[:50], method="path_dependent", attribution="banzhaf"),
                   "path-dependent")
    assert_bitwise(client.explain("xgb_binary", x[:50], method="interventional",
                                  attribution="banzhaf"),
                   model.explain(x[:50], attribution="banzhaf"), "interventional")
    assert_bitwise(client.explain("xgb_binary", x[:10], attribution="banzhaf", interactions=True),
                   model.explain(x[:10], method="path_dependent", attribution="banzhaf",
                                 interactions=True), "interactions")


def test_saabas_attributions(server, models):
    _, client = server
    path, x = models["xgb_binary"]
    model = groveml.Model(path)
    assert_bitwise(client.explain("xgb_binary", x[:50], attribution="saabas"),
                   model.explain(x[:50], attribution="saabas"), "saabas")
    with pytest.raises(Exception, match="no interaction values"):
        client.explain("xgb_binary", x[:5], attribution="saabas", interactions=True)


def test_feature_groups(server, models):
    pd = need("pandas")
    _, client = server
    path, x = models["xgb_binary"]
    model = groveml.Model(path, background=x[:40])
    groups = {"money": ["income", "debt", 5], "history": ["score", "tenure"]}
    for method in ("path_dependent", "interventional"):
        assert_bitwise(client.explain("xgb_binary", x[:30], method=method, groups=groups),
                       model.explain(x[:30], method=method, groups=groups), method)
    assert_bitwise(client.explain("xgb_binary", x[:5], interactions=True, groups=groups),
                   model.explain(x[:5], method="path_dependent", interactions=True,
                                 groups=groups), "interactions")
    df = client.explain("xgb_binary", pd.DataFrame(x[:4], columns=model.feature_names),
                        groups=groups)
    assert list(df.columns) == ["age", "money", "history", "bias"]
    top = client.explain("xgb_binary", x[:4], groups=groups, top_k=1)
    assert set(np.asarray(top.names).ravel()) <= {"age", "money", "history"}


def test_pandas_and_arrow(server, models):
    pd = need("pandas")
    pa = need("pyarrow")
    _, client = server
    path, x = models["lgb_reg"]
    model = groveml.Model(path)
    df = pd.DataFrame(x, columns=model.feature_names, index=np.arange(len(x)) + 100)
    reordered = df[model.feature_names[::-1]].assign(label=0)
    got = client.explain("lgb_reg", reordered)
    assert list(got.columns) == model.feature_names + ["bias"] and (got.index == df.index).all()
    assert_bitwise(got.to_numpy(), model.explain(x))
    table = pa.Table.from_pandas(reordered, preserve_index=False)
    got = client.predict("lgb_reg", table)  # Arrow in, Arrow out
    assert got.schema.names == ["prediction"]
    assert_bitwise(got.column(0).to_numpy(), model.predict(x))
    got = client.explain("lgb_reg", table, output_format="arrow")
    assert_bitwise(np.column_stack([c.to_numpy() for c in got.columns]), model.explain(x))
    frame = client.explain("lgb_reg", df, top_k=2)
    assert list(frame.columns) == ["top1", "top1_value", "top2", "top2_value"]


def test_errors(server, models):
    grpc = need("grpc")
    pd = need("pandas")
    g, client = server
    _, x = models["xgb_binary"]
    df = pd.DataFrame(x, columns=groveml.Model(models["xgb_binary"][0]).feature_names)
    with pytest.raises(ValueError, match=r"lacks the model's features \['rate'\]"):
        client.explain("xgb_binary", df.drop(columns=["rate"]))
    with pytest.raises(ValueError, match="X has 5 columns"):
        client.predict("xgb_binary", x[:, :5])
    with pytest.raises(grpc.RpcError) as e:
        client.explain("no_such_model", x)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as e:
        client.explain("lgb_reg", x, method="interventional")
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "background" in e.value.details()
    with pytest.raises(ValueError, match="background="):
        client.explain("xgb_binary", x, background=x[:3])
    anonymous = groveml.Client(g.target, token="")
    with pytest.raises(grpc.RpcError) as e:
        anonymous.list_models()
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    anonymous.close()


@pytest.mark.parametrize("name", ["xgb_cat", "lgb_cat"])
def test_categorical_columns_are_recoded_by_the_models_categories(server, categorical_models,
                                                                  categorical_frames, name):
    """A frame holding a subset of the model's categories, in another order: its own category codes
    name other categories, so the client recodes it by the categories the server's metadata lists
    (or those given with categories=, which take precedence) and gives Model's numbers."""
    pd = need("pandas")
    pa = need("pyarrow")
    _, client = server
    model = groveml.Model(categorical_models[name])
    assert "color" in model.categories  # the model stores its categories
    df, _ = categorical_frames
    test = df[df["color"].isin(["green", "teal"])].head(40).copy()
    test["color"] = pd.Categorical(test["color"].astype(str), categories=["green", "teal"])
    test["size"] = pd.Categorical(test["size"].astype(int), categories=[7, 5, 3])
    want = model.predict(test, output_format="numpy")
    own_codes = model.rows(test).values.copy()
    own_codes[:, model.feature_names.index("color")] = test["color"].cat.codes
    assert (model.predict(own_codes) != want).any()  # the column's own codes answer wrongly

    # The server lists the categories the model file records, as Model reads them.
    listed = {c.name: list(c.strings) or [int(v) for v in c.numbers]
              for c in client.metadata(name).categories}
    assert listed == model.categories
    recoded = [test, pa.Table.from_pandas(test, preserve_index=False)]
    if model.feature_types:  # strings for a typed categorical feature (XGBoost; LightGBM has none)
        recoded.append(test.assign(color=test["color"].astype(object)))
    for rows in recoded:
        assert_bitwise(client.predict(name, rows, output_format="numpy"), want)
        assert_bitwise(client.explain(name, rows, output_format="numpy"),
                       model.explain(test, output_format="numpy"))

    cats = model.categories
    assert_bitwise(client.predict(name, test, categories=cats, output_format="numpy"), want)
    assert_bitwise(client.explain(name, test, categories=cats, output_format="numpy"),
                   model.explain(test, output_format="numpy"))
    table = pa.Table.from_pandas(test, preserve_index=False)
    assert_bitwise(client.predict(name, table, categories=cats, output_format="numpy"), want)
    assert_bitwise(client.model(name, categories=cats).predict(test, output_format="numpy"), want)
    # The model's codes as numbers need no categories.
    assert_bitwise(client.predict(name, model.rows(test).values), want)
    with pytest.raises(ValueError, match=r"categories= names \['colour'\]"):
        client.predict(name, test, categories={"colour": ["teal"]})


def test_categorical_columns_of_a_model_without_recorded_categories_are_refused(server):
    """A model trained without a DataFrame records no categories: a categorical column's own codes
    could name other categories, so the client refuses it unless categories= says them."""
    pd = need("pandas")
    _, client = server
    assert len(client.metadata("xgb_cat_plain").categories) == 0
    frame = pd.DataFrame({"f0": [0.5, 1.0], "f1": pd.Categorical(["b", "a"]), "f2": [0.0, 1.0],
                          "f3": pd.Categorical(["x", "x"]), "f4": [2.0, 3.0]})
    with pytest.raises(TypeError, match=r"column 'f1' is categorical.*categories="):
        client.predict("xgb_cat_plain", frame)
    codes = client.predict("xgb_cat_plain", frame, categories={"f1": ["a", "b"], "f3": ["x"]},
                           output_format="numpy")
    plain = frame.assign(f1=[1.0, 0.0], f3=[0.0, 0.0]).to_numpy(dtype=np.float64)
    assert_bitwise(codes, client.predict("xgb_cat_plain", plain, output_format="numpy"))


def test_chunked_requests_stream(server, models):
    _, client = server
    path, x = models["xgb_binary"]
    big = np.tile(x, (20, 1))
    small_messages = groveml.Client(client.target, token="groveml-test-token-0123",
                                    max_message_bytes=1 << 16)
    assert small_messages._chunk(small_messages.metadata("xgb_binary"), 7) < len(big)
    model = groveml.Model(path)
    assert_bitwise(small_messages.explain("xgb_binary", big), model.explain(big))  # ExplainStream
    got, want = small_messages.explain("xgb_binary", big, top_k=2), model.explain(big, top_k=2)
    assert (got.features == want.features).all()
    assert_bitwise(got.values, want.values)
    assert_bitwise(small_messages.explain("xgb_binary", big[:300], interactions=True),
                   model.explain(big[:300], interactions=True))
    small_messages.close()

"""groveml.explain_dask / predict_dask on a Dask LocalCluster (two worker processes): the SHAP and
prediction columns equal groveml.Model's in-process results bit for bit, each worker loads the
model once, and partitions are computed in bounded batches."""

import numpy as np
import pytest
from conftest import assert_bitwise, need

import groveml


@pytest.fixture(scope="module")
def cluster():
    need("dask.dataframe")
    distributed = need("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as c, distributed.Client(c) as client:
        yield client


@pytest.mark.parametrize("name", ["xgb_binary", "lgb_reg", "xgb_multi"])
def test_explain_dask_matches_in_process(cluster, models, name):
    pd = need("pandas")
    dd = need("dask.dataframe")
    path, x = models[name]
    model = groveml.Model(path)
    df = pd.DataFrame(x, columns=model.feature_names)[model.feature_names[::-1]]
    df.insert(0, "id", np.arange(len(x)))
    ddf = dd.from_pandas(df, npartitions=4)
    out = groveml.explain_dask(ddf, path, batch_rows=37).compute().sort_values("id")
    names = [n for n in out.columns if n.startswith("shap_")]
    assert_bitwise(out[names].to_numpy(), model.explain(x).reshape(len(x), -1), name)
    assert (out.index == df.index).all()
    # A lambda is shipped by value (the workers cannot import this test file).
    loads = cluster.run(lambda: __import__("groveml._workers", fromlist=["loads"]).loads)
    assert all(n <= 3 for n in loads.values()), loads  # one per model, not per partition


def test_predict_and_interventional_dask(cluster, models):
    pd = need("pandas")
    dd = need("dask.dataframe")
    path, x = models["xgb_binary"]
    model = groveml.Model(path)
    ddf = dd.from_pandas(pd.DataFrame(x, columns=model.feature_names), npartitions=3)
    out = groveml.predict_dask(ddf, path, kind="leaf").compute()
    leaf_names = [n for n in out.columns if n.startswith("leaf_")]
    assert (out[leaf_names].to_numpy() == model.predict(x, kind="leaf")).all()
    bg = x[:25]
    out = groveml.explain_dask(ddf, path, background=bg, output_space="probability_linearized",
                               prefix="iv_").compute()
    names = [n for n in out.columns if n.startswith("iv_")]
    assert_bitwise(out[names].to_numpy(),
                   model.explain(x, background=bg, output_space="probability_linearized"))
    with pytest.raises(ValueError, match="lacks the model's features"):
        groveml.explain_dask(ddf.drop(columns=["age"]), path)
    # Banzhaf values, path-dependent and interventional, as in process.
    out = groveml.explain_dask(ddf, path, attribution="banzhaf", prefix="bz_").compute()
    names = [n for n in out.columns if n.startswith("bz_")]
    assert_bitwise(out[names].to_numpy(), model.explain(x, attribution="banzhaf"))
    out = groveml.explain_dask(ddf, path, background=bg, attribution="banzhaf",
                               prefix="ibz_").compute()
    names = [n for n in out.columns if n.startswith("ibz_")]
    assert_bitwise(out[names].to_numpy(), model.explain(x, background=bg, attribution="banzhaf"))
    with pytest.raises(ValueError, match="attribution"):
        groveml.explain_dask(ddf, path, attribution="owen")


def test_model_objects_are_sent(cluster, models):
    """A groveml.Model and a live Booster travel with the tasks, built once per worker; the
    columns are named as explain_spark names them (a dot made an underscore)."""
    pd = need("pandas")
    dd = need("dask.dataframe")
    lgb = need("lightgbm")
    path, x = models["xgb_multi"]
    model = groveml.Model(path, background=x[:20])
    ddf = dd.from_pandas(pd.DataFrame(x, columns=model.feature_names), npartitions=4)
    out = groveml.explain_dask(ddf, model).compute()
    names = [n for n in out.columns if n.startswith("shap_")]
    assert names[0] == "shap_out0_f0" and names[-1] == "shap_out2_bias"
    assert_bitwise(out[names].to_numpy(), model.explain(x).reshape(len(x), -1))
    lgb_path, lx = models["lgb_reg"]
    booster = lgb.Booster(model_file=lgb_path)
    lmodel = groveml.Model(lgb_path)
    lddf = dd.from_pandas(pd.DataFrame(lx, columns=lmodel.feature_names), npartitions=3)
    out = groveml.predict_dask(lddf, booster).compute()
    assert_bitwise(out["prediction"].to_numpy(), lmodel.predict(lx))
    builds = cluster.run(lambda: __import__("groveml._workers", fromlist=["loads"]).loads)
    assert all(n <= 5 for n in builds.values()), builds  # one per model and options

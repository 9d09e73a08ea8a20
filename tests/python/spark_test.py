"""groveml.explain_spark / predict_spark on a local Spark (local[2], small Arrow batches so that
every partition streams several): the SHAP and prediction columns equal groveml.Model's in-process
results bit for bit, whatever the column order, with id columns passed through; category columns,
which Spark hands over as strings, give the library's numbers."""

import hashlib
import os
import sys

import numpy as np
import pytest
from conftest import assert_bitwise, need

import groveml


@pytest.fixture(scope="module")
def spark():
    need("pyspark")
    need("pyarrow")
    if not any(os.access(os.path.join(p, "java"), os.X_OK)
               for p in os.environ.get("PATH", "").split(os.pathsep)) and not os.environ.get(
                   "JAVA_HOME"):
        need("java_runtime_for_spark")  # skips (or fails under CI): Spark needs a JVM
    from pyspark.sql import SparkSession
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[2]").appName("groveml-test")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "64")
               .config("spark.driver.memory", "1g")
               .getOrCreate())
    yield session
    session.stop()


def frame(pd, model, x):
    df = pd.DataFrame(x, columns=model.feature_names)[model.feature_names[::-1]]
    df.insert(0, "id", np.arange(len(x)))
    return df


@pytest.mark.parametrize("name", ["xgb_binary", "lgb_reg", "xgb_multi"])
def test_explain_spark_matches_in_process(spark, models, name):
    pd = need("pandas")
    path, x = models[name]
    model = groveml.Model(path)
    sdf = spark.createDataFrame(frame(pd, model, x)).repartition(3)
    out = groveml.explain_spark(sdf, path, batch_rows=50).toPandas().sort_values("id")
    names = [n for n in out.columns if n.startswith("shap_")]
    assert len(names) == model.num_outputs * (model.num_features + 1)
    assert (out["id"].to_numpy() == np.arange(len(x))).all()
    want = model.explain(x).reshape(len(x), -1)
    assert_bitwise(out[names].to_numpy(np.float32), want, f"{name} spark")
    assert_bitwise(out[model.feature_names].to_numpy(), x, "passed through")


def test_predict_and_interventional_spark(spark, models):
    pd = need("pandas")
    path, x = models["xgb_binary"]
    model = groveml.Model(path)
    sdf = spark.createDataFrame(frame(pd, model, x))
    out = groveml.predict_spark(sdf, path, kind="margin").toPandas().sort_values("id")
    assert_bitwise(out["margin"].to_numpy(np.float32), model.predict(x, kind="margin"))
    bg = x[:30]
    out = groveml.explain_spark(sdf, path, background=bg, output_space="probability",
                                prefix="iv_").toPandas().sort_values("id")
    names = [n for n in out.columns if n.startswith("iv_")]
    want = model.explain(x, background=bg, output_space="probability")
    assert_bitwise(out[names].to_numpy(np.float32), want)
    with pytest.raises(ValueError, match="lacks the model's features"):
        groveml.explain_spark(sdf.drop("income"), path)
    with pytest.raises(ValueError, match="already has the result columns"):
        groveml.explain_spark(sdf.withColumnRenamed("id", "shap_bias"), path)
    # Banzhaf values, as in process.
    out = groveml.explain_spark(sdf, path, attribution="banzhaf",
                                prefix="bz_").toPandas().sort_values("id")
    names = [n for n in out.columns if n.startswith("bz_")]
    assert_bitwise(out[names].to_numpy(np.float32), model.explain(x, attribution="banzhaf"))


def test_model_shipped_with_add_file(spark, models, tmp_path):
    pd = need("pandas")
    path, x = models["lgb_reg"]
    model = groveml.Model(path)
    shipped = tmp_path / "groveml_shipped_model.txt"
    shipped.write_bytes(open(path, "rb").read())
    spark.sparkContext.addFile(str(shipped))
    assert not os.path.exists(shipped.name)  # only SparkFiles has it under this name
    sdf = spark.createDataFrame(frame(pd, model, x))
    out = groveml.explain_spark(sdf, shipped.name).toPandas().sort_values("id")
    names = [n for n in out.columns if n.startswith("shap_")]
    assert_bitwise(out[names].to_numpy(np.float32), model.explain(x))


def test_each_python_worker_loads_a_model_once(spark, models):
    """A job of many partitions and many Arrow batches builds the model once per Python worker
    (Spark reuses its workers; the model's bytes name it), not once per batch, task or
    partition: after two jobs over 8 partitions, every worker process reports one build of this
    model."""
    pd = need("pandas")
    path, x = models["lgb_reg"]
    model = groveml.Model(path)
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    sdf = spark.createDataFrame(frame(pd, model, x)).repartition(8).cache()
    for _ in range(2):
        out = groveml.explain_spark(sdf, path, batch_rows=16).toPandas()
        assert len(out) == len(x)

    def report(batches):
        import groveml._workers as w
        for _ in batches:
            pass
        keys = [k for k in w._models if k[0] == digest]
        yield pd.DataFrame({"pid": [os.getpid()], "models": [len(keys)], "loads": [w.loads]})

    seen = sdf.mapInPandas(report, "pid long, models long, loads long").toPandas()
    workers = seen.groupby("pid").max()
    assert (workers["models"] <= 1).all(), seen
    # The other tests of this module may have loaded other models in the same workers; this model
    # is at most one of them, and a worker that ran this module's jobs loaded it once.
    assert (workers["loads"] <= 1 + 4).all(), seen
    assert workers["models"].sum() >= 1, seen


def test_model_objects_are_sent(spark, models):
    """A groveml.Model and a live Booster travel with the tasks (no file on the executors), with
    the Model's own background; the columns are named as explain_dask names them."""
    pd = need("pandas")
    xgb = need("xgboost")
    path, x = models["xgb_multi"]
    model = groveml.Model(path, background=x[:20])
    sdf = spark.createDataFrame(frame(pd, model, x)).repartition(2)
    out = groveml.explain_spark(sdf, model).toPandas().sort_values("id")
    names = [n for n in out.columns if n.startswith("shap_")]
    assert names[0] == "shap_out0_f0" and names[-1] == "shap_out2_bias"
    assert_bitwise(out[names].to_numpy(np.float32), model.explain(x).reshape(len(x), -1))
    booster = xgb.Booster(model_file=path)
    out = groveml.predict_spark(sdf, booster, kind="margin").toPandas().sort_values("id")
    assert [n for n in out.columns if n.startswith("margin")] == ["margin_0", "margin_1",
                                                                  "margin_2"]
    assert_bitwise(out[["margin_0", "margin_1", "margin_2"]].to_numpy(np.float32),
                   model.predict(x, kind="margin"))


@pytest.mark.parametrize("name", ["xgb_cat", "lgb_cat"])
def test_category_strings_spark(spark, categorical_models, categorical_frames, name):
    """Spark hands a pandas category column over as strings: predict_spark recodes them by the
    model's categories (a subset, in another order, and a missing one) and gives the library's
    numbers, those of groveml.Model on the categorical frame."""
    pd = need("pandas")
    path = categorical_models[name]
    df, _ = categorical_frames
    test = df[df["color"].isin(["green", "teal"])].head(30).copy()
    test["color"] = pd.Categorical(test["color"].astype(str), categories=["teal", "green"])
    test.loc[test.index[2], "color"] = np.nan
    test.insert(0, "id", np.arange(len(test)))
    want = np.asarray(groveml.Model(path).predict(test.drop(columns="id"), output_format="numpy"),
                      np.float32).reshape(-1)
    if name.startswith("lgb"):
        lgb = need("lightgbm")
        library = lgb.Booster(model_file=path).predict(test.drop(columns="id"))
    else:
        xgb = need("xgboost")
        library = xgb.Booster(model_file=path).inplace_predict(test.drop(columns="id"))
    np.testing.assert_allclose(want, library, rtol=1e-5, atol=1e-6)
    strings = test.assign(color=test["color"].astype(object), size=test["size"].astype(int))
    strings["size"] = strings["size"].astype(str)
    sdf = spark.createDataFrame(strings).repartition(2)
    out = groveml.predict_spark(sdf, path).toPandas().sort_values("id")
    assert_bitwise(out["prediction"].to_numpy(np.float32), want, f"{name} spark strings")

#!/usr/bin/env python3
"""SHAP rows/s of groveml against XGBoost's own SHAP, on the same rows and cores:

  inprocess  groveml.Model(threads=T).explain(X)   vs  Booster.predict(DMatrix, pred_contribs=True)
                                                       (nthread=T; the DMatrix built untimed)
  dask       groveml.explain_dask on a LocalCluster   vs  xgboost.dask.predict(pred_contribs=True)
             (W workers x 1 thread, input persisted before timing, results persisted)
  spark      groveml.explain_spark on local[T]    vs  xgboost.spark's pred_contrib_col
             (input from a Parquet file, results written to Spark's noop sink)
  spark_memory  peak RSS of Spark's Python workers and JVM for explain_spark over the rows and
             over 10x the rows (read from Parquet, not cached)

Rows: the first 10,000 rows of the dataset (features only), repeated to --rows, float32 (the
benchmark rows of shared/bench-models/README.md). Prints one JSON line per measurement (setting,
engine, rows, seconds, rows/s) and a table.

  python3 bench/groveml_shap_bench.py --model ../shared/bench-models/adult-med.ubj \
      --dataset adult --rows 1000000 --settings inprocess,dask,spark
(PYTHONPATH=build/cpu/python, or groveml installed.)
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "shared"))


def load_rows(datasets_dir, dataset, rows):
    with open(os.path.join(datasets_dir, dataset + ".json")) as f:
        meta = json.load(f)
    df = pd.read_csv(os.path.join(datasets_dir, meta["file"]), header=None, names=meta["columns"],
                     nrows=10000, dtype=np.float32, na_values=[""], keep_default_na=False)
    base = np.ascontiguousarray(df.iloc[:, :-1].to_numpy(dtype=np.float32))
    reps = -(-rows // len(base))
    return np.ascontiguousarray(np.tile(base, (reps, 1))[:rows])


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def report(results, setting, engine, rows, seconds, **extra):
    r = {"setting": setting, "engine": engine, "rows": rows, "seconds": round(seconds, 3),
         "rows_per_s": round(rows / seconds, 1)}
    r.update(extra)
    results.append(r)
    print(json.dumps(r), flush=True)


def bench_inprocess(a, x, names, results):
    import xgboost as xgb
    import groveml
    model = groveml.Model(a.model, threads=a.threads)
    model.explain(x[:1000])  # builds the explain engine (path layout, cost probe) untimed
    report(results, "inprocess", "groveml", len(x), timed(lambda: model.explain(x)))
    booster = xgb.Booster(model_file=a.model)
    booster.set_param({"nthread": a.threads})
    booster.predict(xgb.DMatrix(x[:1000], nthread=a.threads), pred_contribs=True)
    d = xgb.DMatrix(x, missing=np.nan, nthread=a.threads)
    report(results, "inprocess", "xgboost pred_contribs", len(x),
           timed(lambda: booster.predict(d, pred_contribs=True)))


def bench_dask(a, x, names, results):
    import dask.dataframe as dd
    import xgboost as xgb
    import xgboost.dask  # noqa: F401 (xgb.dask)
    from distributed import Client, LocalCluster, wait
    import groveml
    df = pd.DataFrame(x, columns=names)
    with LocalCluster(n_workers=a.threads, threads_per_worker=1, dashboard_address=None) as c, \
            Client(c) as client:
        ddf = dd.from_pandas(df, npartitions=4 * a.threads).persist()
        wait(ddf)
        # one small job first, so that the workers have loaded the model before timing
        groveml.explain_dask(ddf.partitions[0].head(100, compute=False), a.model).compute()

        def grove():
            out = groveml.explain_dask(ddf, a.model, threads=1).persist()
            wait(out)
        report(results, "dask", "groveml", len(x), timed(grove))
        booster = xgb.Booster(model_file=a.model)

        def xgboost():
            out = xgb.dask.predict(client, booster, ddf, pred_contribs=True).persist()
            wait(out)
        report(results, "dask", "xgboost.dask pred_contribs", len(x), timed(xgboost))


def bench_spark(a, x, names, results):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession
    import groveml
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = tempfile.mkdtemp(prefix="groveml_bench_")
    parquet = os.path.join(work, "rows.parquet")
    pq.write_table(pa.Table.from_pandas(pd.DataFrame(x, columns=names), preserve_index=False),
                   parquet, row_group_size=100000)
    spark = (SparkSession.builder.master(f"local[{a.threads}]").appName("groveml-bench")
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "4g")
             .getOrCreate())
    try:
        sdf = spark.read.parquet(parquet).repartition(4 * a.threads).cache()
        sdf.count()
        groveml.explain_spark(sdf.limit(100), a.model).write.format("noop").mode(
            "overwrite").save()
        report(results, "spark", "groveml", len(x),
               timed(lambda: groveml.explain_spark(sdf, a.model).write.format("noop").mode(
                   "overwrite").save()))
        from pyspark.sql.functions import lit
        from xgboost import XGBRegressor
        from xgboost.spark import SparkXGBRegressor
        # xgboost.spark makes its models by fitting: fit one round on 100 rows (every parameter
        # then has its default), then put the benchmark model in its place.
        spark_model = SparkXGBRegressor(features_col=names, n_estimators=1, num_workers=1,
                                        pred_contrib_col="contrib").fit(
            sdf.limit(100).withColumn("label", lit(0.0)))
        reg = XGBRegressor()
        reg.load_model(a.model)
        spark_model._xgb_sklearn_model = reg
        report(results, "spark", "xgboost.spark pred_contrib_col", len(x),
               timed(lambda: spark_model.transform(sdf).write.format("noop").mode(
                   "overwrite").save()))
    finally:
        spark.stop()


def process_rss(match):
    """Summed resident memory (bytes) of the processes whose command line has `match`."""
    import psutil
    total = 0
    for p in psutil.process_iter(["cmdline", "memory_info"]):
        try:
            if match(" ".join(p.info["cmdline"] or [])):
                total += p.info["memory_info"].rss
        except (psutil.Error, TypeError):
            pass
    return total


class PeakMemory:
    """Samples the summed RSS of Spark's Python workers and of its JVM every 0.1 s."""

    def __init__(self):
        import threading
        self.peak = {"python_workers": 0, "jvm": 0}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            py = process_rss(lambda c: "pyspark.daemon" in c or "pyspark.worker" in c)
            jvm = process_rss(lambda c: "java" in c and "pyspark-shell" in c)
            self.peak["python_workers"] = max(self.peak["python_workers"], py)
            self.peak["jvm"] = max(self.peak["jvm"], jvm)
            self.stop.wait(0.1)

    def finish(self):
        self.stop.set()
        self.thread.join()
        return {k: round(v / 2**20, 1) for k, v in self.peak.items()}


def bench_spark_memory(a, x, names, results):
    """Peak memory of the Spark job over the rows and over 10 times as many (the rows repeated):
    the Python workers stream Arrow batches, so their memory should not grow with the input."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession
    import groveml
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = tempfile.mkdtemp(prefix="groveml_bench_")
    spark = (SparkSession.builder.master(f"local[{a.threads}]").appName("groveml-bench-memory")
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "4g")
             .getOrCreate())
    try:
        for times in (1, 10):
            parquet = os.path.join(work, f"rows{times}.parquet")
            table = pa.Table.from_pandas(pd.DataFrame(np.tile(x, (times, 1)), columns=names),
                                         preserve_index=False)
            pq.write_table(table, parquet, row_group_size=100000)
            del table
            sdf = spark.read.parquet(parquet)
            peak = PeakMemory()
            seconds = timed(lambda: groveml.explain_spark(sdf, a.model).write.format("noop").mode(
                "overwrite").save())
            report(results, "spark memory", "groveml", len(x) * times, seconds,
                   peak_rss_mib=peak.finish())
    finally:
        spark.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(SHARED, "bench-models", "adult-med.ubj"))
    ap.add_argument("--dataset", default="adult")
    ap.add_argument("--datasets-dir", default=os.path.join(SHARED, "datasets"))
    ap.add_argument("--rows", type=int, default=1000000)
    ap.add_argument("--threads", type=int, default=2, help="cores: threads, workers, local[N]")
    ap.add_argument("--settings", default="inprocess,dask,spark")
    a = ap.parse_args()
    x = load_rows(a.datasets_dir, a.dataset, a.rows)
    import groveml
    names = groveml.Model(a.model).feature_names
    commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(json.dumps({"model": os.path.basename(a.model), "rows": a.rows, "threads": a.threads,
                      "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                      "commit": commit}), flush=True)
    results = []
    for setting in a.settings.split(","):
        {"inprocess": bench_inprocess, "dask": bench_dask, "spark": bench_spark,
         "spark_memory": bench_spark_memory}[setting](a, x, names, results)
    print(f"\n| setting | engine | rows | seconds | rows/s | peak RSS MiB |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['setting']} | {r['engine']} | {r['rows']} | {r['seconds']} | "
              f"{r['rows_per_s']:.0f} | {r.get('peak_rss_mib', '')} |")


if __name__ == "__main__":
    main()

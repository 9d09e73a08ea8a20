"""Bulk predictions and explanations of a Spark DataFrame, through mapInArrow.

Each Python worker loads the model once (groveml._workers) and streams the Arrow batches Spark hands
it (spark.sql.execution.arrow.maxRecordsPerBatch rows, 10,000 by default), cut further into
`batch_rows` rows per engine call, so that a worker's memory is bounded by one batch whatever the
input's size. The result is the input's columns followed by the SHAP (or prediction) columns.
"""

from typing import Optional, Tuple

import numpy as np

from . import _workers


def explain_spark(df, model_path: str, interactions: bool = False, method: Optional[str] = None,
                  background=None, output_space: str = "margin",
                  iteration_range: Tuple[int, int] = (0, 0), prefix: str = "shap_",
                  batch_rows: int = 65536, device: str = "auto", threads: int = 1,
                  strategy: str = "auto"):
    """df with SHAP columns appended: `prefix` + the names `grove explain --output-header` gives
    (feature names then `bias`; outK_ per output for several outputs, A*B for interactions), float.

    model_path: a model file every executor can read, or the name of one shipped with
    spark.sparkContext.addFile(path) (found with SparkFiles.get where no such file is). Other
    arguments as groveml.Model.explain; threads: engine threads per Python worker (Spark runs one
    worker per task slot). device="auto" uses the executor's GPU when it has one (a GPU resource
    assigned to the task is made the visible one)."""
    return _map(df, _workers.explain_spec(model_path, interactions, method, background,
                                          output_space, iteration_range, batch_rows, device,
                                          threads, strategy), prefix)


def predict_spark(df, model_path: str, kind: str = "prediction",
                  iteration_range: Tuple[int, int] = (0, 0), prefix: str = "",
                  batch_rows: int = 65536, device: str = "auto", threads: int = 1,
                  strategy: str = "auto"):
    """df with prediction columns appended (`prediction`, `prediction_J`, `margin`, `leaf_J`, as
    `grove predict --output-header` names them, after `prefix`); leaf ids as int."""
    return _map(df, _workers.predict_spec(model_path, kind, iteration_range, batch_rows, device,
                                          threads, strategy), prefix)


def _map(df, spec, prefix):
    from pyspark.sql.types import FloatType, IntegerType, StructField, StructType
    # A dot in a column name is a struct field access in Spark SQL: out0.f1 becomes out0_f1.
    names = _workers.result_columns(spec, df.limit(0).toPandas(), df.columns,
                                    lambda n: prefix + n.replace(".", "_"))
    leaf = spec.operation == "predict" and spec.kind == "leaf"
    value_type = IntegerType() if leaf else FloatType()
    schema = StructType(df.schema.fields + [StructField(n, value_type, True) for n in names])

    def run(batches):
        import pyarrow as pa
        from ._output import arrow_columns
        _use_task_gpu()
        m = _workers.worker_model(spec)
        for batch in batches:
            for start in range(0, batch.num_rows, spec.batch_rows):
                part = batch.slice(start, spec.batch_rows)
                out = _workers.compute(spec, m, part)
                arrays = list(part.columns) + arrow_columns(out.astype(np.int32) if leaf else out)
                yield pa.RecordBatch.from_arrays(arrays, names=list(part.schema.names) + names)

    return df.mapInArrow(run, schema)


def _use_task_gpu():
    """With Spark GPU scheduling, makes the task's GPU the one this worker sees (before the first
    model load; CUDA reads CUDA_VISIBLE_DEVICES once)."""
    import os
    if _workers.loads:
        return
    try:
        from pyspark import TaskContext
        context = TaskContext.get()
        gpus = context.resources().get("gpu") if context is not None else None
    except Exception:  # noqa: BLE001 (no task context or resources API: nothing to do)
        return
    if gpus is not None and gpus.addresses:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus.addresses)

"""Bulk predictions and explanations of a Spark DataFrame, through mapInArrow.

The model travels with the tasks (its bytes, as a pickled groveml.Model); each Python worker builds
its engines once (groveml._workers) and streams the Arrow batches Spark hands
it (spark.sql.execution.arrow.maxRecordsPerBatch rows, 10,000 by default), cut further into
`batch_rows` rows per engine call, so that a worker's memory is bounded by one batch whatever the
input's size. The result is the input's columns followed by the SHAP (or prediction) columns.
"""

from typing import Optional, Tuple

import numpy as np

from . import _workers


def explain_spark(df, model, interactions: bool = False, method: Optional[str] = None,
                  background=None, output_space: str = "margin",
                  iteration_range: Tuple[int, int] = (0, 0), prefix: str = "shap_",
                  batch_rows: int = 65536, device: Optional[str] = None, threads: int = 1,
                  strategy: Optional[str] = None, attribution: str = "shapley"):
    """df with SHAP columns appended: `prefix` + the names `grove explain --output-header` gives,
    a dot made an underscore (feature names then `bias`; `outK_` per output for several outputs,
    `A*B` for interactions), float.

    model: a groveml.Model (sent to the executors with the tasks), a live XGBoost / LightGBM
    model, or the path of a model file read on the driver (or the name of one added with
    spark.sparkContext.addFile). device and strategy: the workers' (default: the Model's own,
    "auto" for a path); threads: engine threads per Python worker (Spark runs one worker per task
    slot). device="auto" uses the executor's GPU when it has one (a GPU resource assigned to the
    task is made the visible one). background: default the Model's. attribution: "shapley" (SHAP
    values), "banzhaf" (Banzhaf values) or "saabas" (Saabas attributions, path-dependent only).
    Other arguments as groveml.Model.explain."""
    return _map(df, _workers.explain_spec(model, interactions, method, background,
                                          output_space, iteration_range, batch_rows, device,
                                          threads, strategy, attribution), prefix)


def predict_spark(df, model, kind: str = "prediction",
                  iteration_range: Tuple[int, int] = (0, 0), prefix: str = "",
                  batch_rows: int = 65536, device: Optional[str] = None, threads: int = 1,
                  strategy: Optional[str] = None):
    """df with prediction columns appended (`prediction`, `prediction_J`, `margin`, `leaf_J`, as
    `grove predict --output-header` names them, after `prefix`); leaf ids as int. model and the
    other arguments as explain_spark's."""
    return _map(df, _workers.predict_spec(model, kind, iteration_range, batch_rows, device,
                                          threads, strategy), prefix)


def _map(df, spec, prefix):
    from pyspark.sql.types import FloatType, IntegerType, StructField, StructType
    names = _workers.result_columns(spec, df.limit(0).toPandas(), df.columns, prefix)
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

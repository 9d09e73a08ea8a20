"""One Model per worker process for the Spark and Dask helpers: loaded on a worker's first batch and
kept for every later batch and task of that process (Spark reuses its Python workers; Dask keeps its
worker processes), so a job loads each model once per worker instead of once per batch."""

import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Optional, Tuple

from .model import Model

_models = {}
_lock = threading.Lock()
loads = 0  # models loaded by this process (tests check that a job loads once per worker)


@dataclass(frozen=True)
class Spec:
    """What a worker computes: picklable, shipped with the task."""

    model_path: str
    device: str = "auto"
    threads: int = 1
    strategy: str = "auto"
    operation: str = "explain"  # "explain" or "predict"
    kind: str = "prediction"  # predict
    interactions: bool = False  # explain
    method: Optional[str] = None
    output_space: str = "margin"
    iteration_range: Tuple[int, int] = (0, 0)
    batch_rows: int = 65536  # rows per engine call: bounds a worker's memory per batch
    background: Optional[object] = field(default=None, compare=False, hash=False)


def model_file(path: str) -> str:
    """`path`, or, when no such file is here and Spark is running, the file of that name shipped
    with SparkContext.addFile (SparkFiles.get), so that executors without shared storage find the
    model the driver sent them."""
    if os.path.exists(path) or "pyspark" not in sys.modules:
        return path
    try:
        from pyspark import SparkFiles
        shipped = SparkFiles.get(os.path.basename(path))
    except Exception:  # noqa: BLE001 (no SparkContext or SparkFiles root here: keep the path)
        return path
    return shipped if os.path.exists(shipped) else path


def worker_model(spec: Spec) -> Model:
    global loads
    key = (spec.model_path, spec.device, spec.threads, spec.strategy)
    with _lock:
        model = _models.get(key)
        if model is None:
            model = Model(model_file(spec.model_path), device=spec.device, threads=spec.threads,
                          strategy=spec.strategy)
            _models[key] = model
            loads += 1
    return model


def compute(spec: Spec, model: Model, table):
    """The flat result matrix of `table` (a pandas DataFrame or an Arrow table / batch)."""
    rows = model.rows(table)
    if spec.operation == "predict":
        return model.predict_matrix(rows, spec.kind, spec.iteration_range)
    return model.explain_matrix(rows, spec.interactions, spec.method, spec.background,
                                spec.output_space, spec.iteration_range)


def explain_spec(model_path, interactions=False, method=None, background=None,
                 output_space="margin", iteration_range=(0, 0), batch_rows=65536,
                 device="auto", threads=1, strategy="auto") -> Spec:
    return Spec(str(model_path), device, int(threads), strategy, "explain",
                interactions=bool(interactions), method=method, output_space=output_space,
                iteration_range=tuple(iteration_range), batch_rows=int(batch_rows),
                background=background)


def predict_spec(model_path, kind="prediction", iteration_range=(0, 0), batch_rows=65536,
                 device="auto", threads=1, strategy="auto") -> Spec:
    return Spec(str(model_path), device, int(threads), strategy, "predict", kind=kind,
                iteration_range=tuple(iteration_range), batch_rows=int(batch_rows))


def result_columns(spec: Spec, empty_input, existing, name):
    """On the driver, before the job: loads the model (a bad file fails here), checks the input's
    columns with an empty frame of them (missing features, bad types fail here), and returns the
    result's column names (`name` applied to each name `grove --output-header` gives), refusing
    names the input already has."""
    from . import _core
    model = worker_model(spec)
    model.rows(empty_input)
    if spec.operation == "predict":
        width = model._engine.predict_width(spec.kind, *spec.iteration_range)
    else:
        width = model._engine.explain_width(spec.interactions)
    names = [name(n) for n in _core.result_column_names(
        model.feature_names, model.num_outputs, spec.operation == "explain", spec.interactions,
        spec.kind, width)]
    clash = sorted(set(names) & set(map(str, existing)))
    if clash:
        raise ValueError(f"the input already has the result columns {clash[:5]}; choose another "
                         "prefix")
    return names

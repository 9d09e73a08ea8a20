"""One Model per worker process for the Spark and Dask helpers. The helpers send the model itself
(its bytes and options, as a Model pickles) with the tasks; a worker builds its engines on its first
batch and keeps them for every later batch and task of that process (Spark reuses its Python
workers; Dask keeps its worker processes), found again by the bytes' digest, so a job builds each
model once per worker instead of once per task."""

import hashlib
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Optional, Tuple

from . import _output
from .model import ATTRIBUTIONS, Model

_models = {}
_lock = threading.Lock()
loads = 0  # models built by this process (tests check that a job builds once per worker)


class ShippedModel:
    """A Model as the helpers send it: its bytes, where they came from, and the engine options of
    the workers; `key` names it in a worker's cache. The driver's Model itself is not sent."""

    def __init__(self, model: Model, device: str, threads: int, strategy: str):
        self.data = model._bytes
        self.source = model.path
        self.device, self.threads, self.strategy = device, int(threads), strategy
        self.key = (hashlib.sha256(self.data).hexdigest(), device, int(threads), strategy)
        self.driver_model = model

    def __getstate__(self):
        state = dict(self.__dict__)
        state["driver_model"] = None
        return state

    def __eq__(self, other):
        return isinstance(other, ShippedModel) and other.key == self.key

    def __hash__(self):
        return hash(self.key)

    def __dask_tokenize__(self):
        return self.key


def shipped_model(model, device: Optional[str], threads: int,
                  strategy: Optional[str]) -> ShippedModel:
    """What the workers get for `model`: a groveml.Model (device and strategy default to its
    own), a live XGBoost / LightGBM model, or the path of a model file, read here on the driver
    (device and strategy default to "auto")."""
    if not isinstance(model, Model):
        if isinstance(model, (str, os.PathLike)):
            model = Model(model_file(os.fspath(model)), device="cpu", threads=1)
        else:
            model = Model.from_booster(model, device="cpu", threads=1)
        device = device or "auto"
        strategy = strategy or "auto"
    return ShippedModel(model, device or model.device, threads, strategy or model.strategy)


@dataclass(frozen=True)
class Spec:
    """What a worker computes: picklable, shipped with the task."""

    model: ShippedModel
    operation: str = "explain"  # "explain" or "predict"
    kind: str = "prediction"  # predict
    interactions: bool = False  # explain
    method: Optional[str] = None
    output_space: str = "margin"
    attribution: str = "shapley"  # explain
    iteration_range: Tuple[int, int] = (0, 0)
    batch_rows: int = 65536  # rows per engine call: bounds a worker's memory per batch
    background: Optional[object] = field(default=None, compare=False, hash=False)


def model_file(path: str) -> str:
    """`path`, or, when no such file is here and Spark is running, the file of that name added
    with SparkContext.addFile (SparkFiles.get), which the driver reads (the workers get its
    bytes with the tasks)."""
    if os.path.exists(path) or "pyspark" not in sys.modules:
        return path
    try:
        from pyspark import SparkFiles
        shipped = SparkFiles.get(os.path.basename(path))
    except Exception:  # noqa: BLE001 (no SparkContext or SparkFiles root here: keep the path)
        return path
    return shipped if os.path.exists(shipped) else path


def worker_model(spec: Spec) -> Model:
    """This process's Model of spec.model: the driver's own where the task runs on the driver
    with its options, else built from the bytes on the process's first call and kept."""
    global loads
    shipped = spec.model
    own = shipped.driver_model
    if own is not None and (own.device, own.threads, own.strategy) == shipped.key[1:]:
        return own
    with _lock:
        model = _models.get(shipped.key)
        if model is None:
            model = Model.from_bytes(shipped.data, shipped.device, shipped.threads,
                                     shipped.strategy, source=shipped.source)
            _models[shipped.key] = model
            loads += 1
    return model


def compute(spec: Spec, model: Model, table):
    """The flat result matrix of `table` (a pandas DataFrame or an Arrow table / batch)."""
    rows = model.rows(table)
    if spec.operation == "predict":
        return model.predict_matrix(rows, spec.kind, spec.iteration_range)
    return model.explain_matrix(rows, spec.interactions, spec.method, spec.background,
                                spec.output_space, spec.iteration_range,
                                attribution=spec.attribution)


def explain_spec(model, interactions=False, method=None, background=None,
                 output_space="margin", iteration_range=(0, 0), batch_rows=65536,
                 device=None, threads=1, strategy=None, attribution="shapley") -> Spec:
    _output.check_choice("attribution", attribution, ATTRIBUTIONS)
    if attribution == "saabas" and (method == "interventional" or interactions or
                                    background is not None):
        # Refused here, on the driver, rather than by every task on the executors.
        raise ValueError("Saabas attributions are path-dependent values only: no "
                         "method='interventional', background or interactions")
    shipped = shipped_model(model, device, threads, strategy)
    if background is None and attribution != "saabas":  # a Model's own leaves Saabas path-dependent
        background = shipped.driver_model._background
    return Spec(shipped, "explain", interactions=bool(interactions), method=method,
                output_space=output_space, iteration_range=tuple(iteration_range),
                batch_rows=int(batch_rows), background=background, attribution=attribution)


def predict_spec(model, kind="prediction", iteration_range=(0, 0), batch_rows=65536,
                 device=None, threads=1, strategy=None) -> Spec:
    return Spec(shipped_model(model, device, threads, strategy), "predict", kind=kind,
                iteration_range=tuple(iteration_range), batch_rows=int(batch_rows))


def result_columns(spec: Spec, empty_input, existing, prefix: str):
    """On the driver, before the job: checks the input's columns with an empty frame of them
    (missing features, bad types fail here), and returns the result's column names: `prefix` and
    the names `grove --output-header` gives, a dot made an underscore (`shap_out0_f1`: a dot is a
    struct field access in Spark SQL, and one naming serves Spark and Dask); names the input
    already has are refused."""
    from . import _core
    model = spec.model.driver_model
    model.rows(empty_input)
    if spec.operation == "predict":
        width = model._engine.predict_width(spec.kind, *spec.iteration_range)
    else:
        width = model._engine.explain_width(spec.interactions)
    names = [prefix + n.replace(".", "_") for n in _core.result_column_names(
        model.feature_names, model.num_outputs, spec.operation == "explain", spec.interactions,
        spec.kind, width)]
    clash = sorted(set(names) & set(map(str, existing)))
    if clash:
        raise ValueError(f"the input already has the result columns {clash[:5]}; choose another "
                         "prefix")
    return names

"""Bulk predictions and explanations of a Dask DataFrame, through map_partitions.

The model travels with the tasks (its bytes, as a pickled groveml.Model); each worker process builds
its engines once (groveml._workers); a partition is computed in batches of
`batch_rows` rows, so the engines' memory is bounded by one batch, and the result is the partition's
columns followed by the SHAP (or prediction) columns.
"""

from typing import Optional, Tuple

import numpy as np

from . import _workers


def explain_dask(ddf, model, interactions: bool = False, method: Optional[str] = None,
                 background=None, output_space: str = "margin",
                 iteration_range: Tuple[int, int] = (0, 0), prefix: str = "shap_",
                 batch_rows: int = 65536, device: Optional[str] = None, threads: int = 1,
                 strategy: Optional[str] = None, attribution: str = "shapley"):
    """ddf with SHAP columns appended (float32), named as explain_spark names them: `prefix` + the
    names `grove explain --output-header` gives, a dot made an underscore (`shap_out0_f1`).
    model: a groveml.Model (sent to the workers with the tasks), a live XGBoost / LightGBM model,
    or the path of a model file read here. device and strategy: the workers' (default: the
    Model's own, "auto" for a path); threads: engine threads per task (Dask runs tasks on its own
    threads); background: default the Model's. attribution: "shapley" (SHAP values), "banzhaf"
    (Banzhaf values) or "saabas" (Saabas attributions, path-dependent only). Other arguments as groveml.Model.explain."""
    return _map(ddf, _workers.explain_spec(model, interactions, method, background,
                                           output_space, iteration_range, batch_rows, device,
                                           threads, strategy, attribution), prefix)


def predict_dask(ddf, model, kind: str = "prediction",
                 iteration_range: Tuple[int, int] = (0, 0), prefix: str = "",
                 batch_rows: int = 65536, device: Optional[str] = None, threads: int = 1,
                 strategy: Optional[str] = None):
    """ddf with prediction columns appended (names as `grove predict --output-header`, after
    `prefix`). model and the other arguments as explain_dask's."""
    return _map(ddf, _workers.predict_spec(model, kind, iteration_range, batch_rows, device,
                                           threads, strategy), prefix)


def _map(ddf, spec, prefix):
    import pandas as pd
    meta = ddf._meta
    names = _workers.result_columns(spec, meta, meta.columns, prefix)
    dtype = np.int32 if spec.operation == "predict" and spec.kind == "leaf" else np.float32
    out_meta = pd.concat([meta, pd.DataFrame(np.empty((0, len(names)), dtype), columns=names,
                                             index=meta.index)], axis=1)
    return ddf.map_partitions(_partition, spec, names, dtype, meta=out_meta)


def _partition(pdf, spec, names, dtype):
    import pandas as pd
    model = _workers.worker_model(spec)
    parts = [_workers.compute(spec, model, pdf.iloc[start:start + spec.batch_rows])
             for start in range(0, len(pdf), spec.batch_rows)]
    out = np.concatenate(parts) if parts else np.empty((0, len(names)), np.float32)
    result = pd.DataFrame(out.astype(dtype, copy=False), columns=names, index=pdf.index)
    return pd.concat([pdf, result], axis=1)

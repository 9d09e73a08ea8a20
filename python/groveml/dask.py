"""Bulk predictions and explanations of a Dask DataFrame, through map_partitions.

The model travels with the tasks (its bytes, as a pickled groveml.Model); each worker process builds
its engines once (groveml._workers); a partition is computed in batches of
`batch_rows` rows, so the engines' memory is bounded by one batch, and the result is the partition's
columns followed by the SHAP (or prediction) columns.
"""

import numpy as np

from . import _workers


_EXPLAIN_DOC = """df (a Dask DataFrame) with SHAP columns appended (float32), named as
    explain_spark names them: `prefix` + the names `grove explain --output-header` gives, a dot
    made an underscore (`shap_out0_f1`). model: a groveml.Model (sent to the workers with the
    tasks), a live XGBoost / LightGBM model, or the path of a model file read here. device and
    strategy: the workers' (default: the Model's own, "auto" for a path); threads: engine
    threads per task (Dask runs tasks on its own threads); background: default the Model's.
    attribution: "shapley" (SHAP values) or "banzhaf" (Banzhaf values). Other arguments as
    groveml.Model.explain."""

_PREDICT_DOC = """df with prediction columns appended (names as `grove predict --output-header`,
    after `prefix`). model and the other arguments as explain_dask's."""


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


explain_dask, predict_dask = _workers.frame_helpers(_map, __name__, "dask", _EXPLAIN_DOC,
                                                    _PREDICT_DOC)

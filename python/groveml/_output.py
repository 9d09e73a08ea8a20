"""Results of the engines (or of groved) as numpy arrays, DataFrames or shap.Explanation objects.

Every result starts as the flat float32 matrix `grove` writes (rows x width, XGBoost's
pred_contribs / pred_interactions order, bias last). numpy results take XGBoost's shapes; a
DataFrame or an Arrow table has the columns `grove --output-header` names (a DataFrame keeps the
input's index).
"""

import functools
import numbers
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from . import _core

FORMATS = ("auto", "numpy", "pandas", "arrow", "shap")
PREDICT_FORMATS = ("auto", "numpy", "pandas", "arrow")


def check_choice(what: str, value, allowed):
    """ValueError naming the accepted values unless `value` is one of them."""
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, allowed))} (got {value!r})")


def check_format(output_format: str, allowed=FORMATS):
    check_choice("output_format", output_format, allowed)


def check_top_k(top_k, interactions: bool = False):
    """top_k is None (every feature's value) or a count of at least 1; not with interactions,
    whose values a top-k of SHAP values would leave out."""
    if top_k is None:
        return
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral):
        raise TypeError(f"top_k must be an integer or None (got {top_k!r})")
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1 (got {top_k}); top_k=None gives every "
                         "feature's SHAP value")
    if interactions:
        raise ValueError("top_k ranks SHAP values and interactions=True returns interaction "
                         "values: ask for each in its own call (explain(X, top_k=k) and "
                         "explain(X, interactions=True))")


def resolved_format(output_format: str, source: str) -> str:
    """"auto": results in the input's kind (a DataFrame for a DataFrame, an Arrow table for Arrow
    input), numpy otherwise."""
    if output_format == "auto":
        return {"pandas": "pandas", "arrow": "arrow"}.get(source, "numpy")
    return output_format


@dataclass
class TopFeatures:
    """The k features with the largest |SHAP value| per row (and output), by |value| descending,
    ties to the lower feature index (groved's top_k). Arrays are (rows, k), or (rows, outputs, k)
    for a model with several outputs."""

    features: np.ndarray  # int32 feature indices
    values: np.ndarray  # float32 SHAP values
    names: np.ndarray  # feature names (object)
    bias: np.ndarray  # (outputs,) float32: the bias column of each output

    def to_arrow(self):
        """A pyarrow Table with to_frame's columns."""
        import pyarrow as pa
        return pa.Table.from_pandas(self.to_frame(), preserve_index=False)

    def to_frame(self, index=None):
        """A DataFrame with columns top1, top1_value, top2, ... (prefixed outK. per output)."""
        import pandas as pd
        names = self.names if self.names.ndim == 3 else self.names[:, None, :]
        values = self.values if self.values.ndim == 3 else self.values[:, None, :]
        outputs = names.shape[1]
        data = {}
        for o in range(outputs):
            prefix = f"out{o}." if outputs > 1 else ""
            for i in range(names.shape[2]):
                data[f"{prefix}top{i + 1}"] = names[:, o, i]
                data[f"{prefix}top{i + 1}_value"] = values[:, o, i]
        return pd.DataFrame(data, index=index)


@dataclass
class Explanation:
    """explain(..., residuals=True): the result explain() returns otherwise, with how far each
    row is from additivity. residuals is (rows,) for one output, (rows, outputs) for several: the
    sum in double of the row's float32 values and bias (of its interaction matrix for interaction
    values) minus the model's float32 output in the explained space (the margin, or the link's
    output in the probability spaces); `arithmetic` says so in the words of groved's
    residual_arithmetic. Near 0 (rounding) for SHAP values; Banzhaf values are not additive."""

    values: Any
    residuals: np.ndarray
    arithmetic: str


def residuals_of(out: np.ndarray, outputs: np.ndarray, num_outputs: int) -> np.ndarray:
    """Residuals of a flat result (rows x K blocks, values or interaction matrices) against the
    model's outputs (rows x K): per block the sum in float64 minus the output, as float32
    (core/servable/residuals.h)."""
    n = out.shape[0]
    sums = out.reshape(n, num_outputs, -1).astype(np.float64).sum(axis=2)
    return (sums - outputs.reshape(n, num_outputs).astype(np.float64)).astype(np.float32)


def residual_result(residuals: np.ndarray, num_outputs: int) -> np.ndarray:
    """(rows,) for one output, (rows, outputs) for several."""
    return residuals[:, 0] if num_outputs == 1 else residuals


def check_residuals(residuals: bool, top_k):
    """Residuals are of full results: not with top_k."""
    if residuals and top_k is not None:
        raise ValueError("residuals=True checks every value of a row against its output; top_k "
                         "returns some of them: ask for each in its own call")


def top_k(values: np.ndarray, num_outputs: int, feature_names: Sequence[str], k: int,
          bias: Optional[np.ndarray] = None) -> TopFeatures:
    """Top-k of SHAP values (rows x K*(F+1)) exactly as groved orders them
    (server/grove_v1/grove_convert.cc TopK): |value| descending, ties to the lower feature."""
    f = len(feature_names)
    k = max(0, min(int(k), f))
    blocks = values.reshape(values.shape[0], num_outputs, f + 1)
    phi = blocks[:, :, :f]
    # A stable sort of -|v| keeps the lower feature first among equal magnitudes.
    order = np.argsort(-np.abs(phi), axis=-1, kind="stable")[:, :, :k].astype(np.int32)
    top_values = np.take_along_axis(phi, order, axis=-1)
    if bias is None:
        bias = blocks[0, :, f] if len(blocks) else np.zeros(num_outputs, np.float32)
    names = np.asarray(list(feature_names), dtype=object)[order]
    if num_outputs == 1:
        order, top_values, names = order[:, 0], top_values[:, 0], names[:, 0]
    return TopFeatures(order, top_values, names, np.asarray(bias, dtype=np.float32))


def arrow_columns(out: np.ndarray):
    """The columns of a result matrix as Arrow arrays (one copy, column-major)."""
    import pyarrow as pa
    return [pa.array(c) for c in np.ascontiguousarray(out.T)]


def top_result(top: TopFeatures, fmt: str, rows):
    if fmt == "pandas":
        return top.to_frame(rows.index)
    return top.to_arrow() if fmt == "arrow" else top


@functools.lru_cache(maxsize=64)
def column_names(feature_names: tuple, num_outputs: int, explain: bool, interactions: bool,
                 kind: str, width: int) -> tuple:
    """The names `grove --output-header` gives a result's columns (kept: a one-row call would
    spend more on them than on its row)."""
    return tuple(_core.result_column_names(list(feature_names), num_outputs, explain,
                                           interactions, kind, width))


@functools.lru_cache(maxsize=64)
def _pandas_columns(names: tuple):
    import pandas as pd
    return pd.Index(names)  # inferring the type of the names costs ~30 us: done once


def _named(out, names: tuple, fmt, index):
    """A result matrix as a DataFrame (with the input's index) or an Arrow table."""
    if fmt == "arrow":
        import pyarrow as pa
        return pa.table(arrow_columns(out), names=list(names))
    import pandas as pd
    # A copy of the kept Index: a caller may rename a result's columns in place.
    return pd.DataFrame(out, columns=_pandas_columns(names).copy(), index=index)


def predict_result(out: np.ndarray, kind: str, fmt: str, feature_names, num_outputs: int, rows):
    """`rows`: the _input.Rows predicted (a DataFrame result takes their index)."""
    if kind == "leaf":
        out = out.astype(np.int32)  # leaf ids, exact below 2^24
    if fmt in ("pandas", "arrow"):
        names = column_names(tuple(feature_names), num_outputs, False, False, kind,
                             out.shape[1])
        return _named(out, names, fmt, rows.index if fmt == "pandas" else None)
    if fmt == "shap":
        raise ValueError("output_format='shap' is for explain(); predict returns numpy or pandas")
    if out.shape[1] == 1 and kind != "leaf":
        return out[:, 0]
    return out


def explain_result(out: np.ndarray, interactions: bool, fmt: str, feature_names,
                   num_outputs: int, rows) -> Any:
    """`rows`: the _input.Rows explained (a DataFrame result takes their index, a
    shap.Explanation their original values as its data)."""
    f1 = len(feature_names) + 1
    k = num_outputs
    if fmt in ("pandas", "arrow"):
        names = column_names(tuple(feature_names), k, True, interactions, "prediction",
                             out.shape[1])
        return _named(out, names, fmt, rows.index if fmt == "pandas" else None)
    if fmt == "shap":
        from . import _input
        return _explanation(out, interactions, feature_names, k,
                            _input.original_values(rows, feature_names))
    shape = (f1, f1) if interactions else (f1,)
    return out.reshape((out.shape[0],) + ((k,) if k > 1 else ()) + shape)


def _explanation(out, interactions, feature_names, k, data):
    """shap.Explanation with shap's TreeExplainer layout: values (rows, F[, F]) for one output,
    (rows, F[, F], outputs) for several; base values (rows,) or (rows, outputs)."""
    import shap
    n = out.shape[0]
    f = len(feature_names)
    f1 = f + 1
    if interactions:
        m = out.reshape(n, k, f1, f1)
        values = np.moveaxis(m[:, :, :f, :f], 1, -1)
        base = m[:, :, f, f]
    else:
        m = out.reshape(n, k, f1)
        values = np.moveaxis(m[:, :, :f], 1, -1)
        base = m[:, :, f]
    if k == 1:
        values, base = values[..., 0], base[:, 0]
    return shap.Explanation(values=values, base_values=base, data=data,
                            feature_names=list(feature_names))

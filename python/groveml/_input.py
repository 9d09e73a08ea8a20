"""Input rows for the engines: numpy, pandas or Arrow in, one dense row-major matrix out.

The engines take rows x features values, row-major, NaN for a missing value. float32 input is passed
as it is (no copy when already C-contiguous); every other numeric input becomes float64, which the
extension converts to float rows as `grove` converts the doubles it parses from CSV
(core/model/double_rows.h: LightGBM compares doubles). Columns of a DataFrame or an Arrow table are
matched to the model's feature names by name (any order; other columns are ignored, as
`grove --header` drops them); a categorical column is turned into the model's category codes, and
refused where the model's categories are not known (categories=None): its own codes would name
other categories whenever it holds a subset of the model's, or another order.
"""

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np


@dataclass
class Rows:
    """Rows ready for the engines."""

    values: np.ndarray  # (n, F), float32 or float64, C-contiguous
    index: Any = None  # the DataFrame's index (pandas input), else None
    source: str = "numpy"  # "numpy", "pandas" or "arrow"


def _is_pandas(x):
    pd = _module("pandas")
    return pd is not None and isinstance(x, pd.DataFrame)


def _is_arrow(x):
    pa = _module("pyarrow")
    return pa is not None and isinstance(x, (pa.Table, pa.RecordBatch))


def _module(name):
    """An optional dependency if it is already imported or importable, else None."""
    import importlib
    import sys
    if name in sys.modules:
        return sys.modules[name]
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def prepare(x, feature_names: Sequence[str], feature_types: Sequence[str],
            categories: Optional[Dict[str, list]], what: str = "X") -> Rows:
    """Rows of `x` (numpy array, pandas DataFrame, pyarrow Table or RecordBatch) for a model with
    these features. `categories`: {feature: the model's categories in code order} (empty: the model
    stores none), or None where they are not known, and categorical columns are then refused.
    Raises ValueError (shapes, missing columns) or TypeError (column types) naming what is wrong,
    and `what` the input is ("X", "background")."""
    if _is_pandas(x):
        return Rows(_frame_values(x, feature_names, feature_types, categories, what), x.index,
                    "pandas")
    if _is_arrow(x):
        return Rows(_arrow_values(x, feature_names, feature_types, categories, what), None,
                    "arrow")
    return Rows(_array_values(x, len(feature_names), what), None, "numpy")


def _array_values(x, num_features: int, what: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        if hasattr(x, "__array__") or isinstance(x, (list, tuple)):
            x = np.asarray(x)
        else:
            raise TypeError(f"{what} must be a numpy array, a pandas DataFrame or a pyarrow Table / "
                            f"RecordBatch (got {type(x).__name__})")
    if x.ndim != 2:
        raise ValueError(f"{what} must be 2-D (rows x {num_features} features); got shape {x.shape}"
                         + (f"; for one row use {what}.reshape(1, -1)" if x.ndim == 1 else ""))
    if x.shape[1] != num_features:
        raise ValueError(f"{what} has {x.shape[1]} columns, the model has {num_features} features")
    if x.dtype == np.float32:
        return np.ascontiguousarray(x)  # no copy when already C-contiguous
    if x.dtype == np.float64:
        return np.ascontiguousarray(x)
    if x.dtype.kind in "iub" or x.dtype == np.float16:
        return np.ascontiguousarray(x, dtype=np.float64)  # integers are exact in float64
    raise TypeError(f"{what} has dtype {x.dtype}; groveml takes float32, float64, integer or boolean "
                    "arrays (NaN = missing)")


def _check_columns(columns: List[str], feature_names: Sequence[str], what: str):
    seen = set()
    duplicates = [c for c in columns if c in seen or seen.add(c)]
    wanted = set(feature_names)
    duplicates = sorted({c for c in duplicates if c in wanted})
    if duplicates:
        raise ValueError(f"{what} has the feature columns {duplicates} more than once")
    missing = [n for n in feature_names if n not in seen]
    if missing:
        extra = [c for c in columns if c not in wanted]
        raise ValueError(
            f"{what} lacks the model's features {_short(missing)}"
            + (f"; its other columns are {_short(extra)}" if extra else "")
            + f" (the model's features: {_short(list(feature_names))})")


def _short(names, most=12):
    names = list(names)
    text = ", ".join(repr(n) for n in names[:most])
    return "[" + text + (f", ... ({len(names)} in all)" if len(names) > most else "") + "]"


def _category_codes(values, name: str, feature_type: Optional[str],
                    categories: Optional[Dict[str, list]]):
    """Category codes (float64, NaN = missing or unknown) of a pandas Categorical / object Series:
    the position of each value in the model's categories when the model stores them (as XGBoost
    and LightGBM recode a DataFrame), else the column's own category codes. TypeError when the
    model's categories are not known (`categories` None)."""
    import pandas as pd
    if feature_type not in (None, "", "c"):
        raise TypeError(f"column {name!r} is categorical but the model's feature {name!r} has type "
                        f"{feature_type!r}; give its numeric values")
    if categories is None:
        raise TypeError(
            f"column {name!r} is categorical, and the categories the model was trained with are "
            "not known here, so its values cannot be turned into the model's codes (the column's "
            "own codes name other categories when it holds a subset of them, or another order): "
            "pass categories={feature: categories in the model's order} (groveml.Model(path)"
            ".categories gives them), or give the model's category codes as numbers")
    known = categories.get(name)
    if known is not None:
        codes = pd.Categorical(values, categories=known).codes
    elif isinstance(getattr(values, "dtype", None), pd.CategoricalDtype):
        codes = values.cat.codes.to_numpy()
    else:
        raise TypeError(f"column {name!r} holds {getattr(values, 'dtype', 'strings')} values and "
                        "the model stores no categories to map them to; give the category codes "
                        "or a categorical dtype")
    out = codes.astype(np.float64)
    out[codes < 0] = np.nan
    return out


def _frame_values(df, feature_names, feature_types, categories, what) -> np.ndarray:
    import pandas as pd
    columns = [str(c) for c in df.columns]
    _check_columns(columns, feature_names, what)
    position = {c: i for i, c in enumerate(columns)}
    types = list(feature_types) if len(feature_types) == len(feature_names) else [None] * len(
        feature_names)
    series = [df.iloc[:, position[n]] for n in feature_names]
    all_f32 = all(s.dtype == np.float32 for s in series)
    out = np.empty((len(df), len(feature_names)), dtype=np.float32 if all_f32 else np.float64)
    for j, (name, s) in enumerate(zip(feature_names, series)):
        dtype = s.dtype
        if isinstance(dtype, pd.CategoricalDtype):
            out[:, j] = _category_codes(s, name, types[j], categories)
        elif pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
            out[:, j] = s.to_numpy(dtype=out.dtype, na_value=np.nan)
        elif types[j] == "c" and (categories is None or name in categories) and (
                pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype)):
            out[:, j] = _category_codes(s, name, types[j], categories)
        else:
            raise TypeError(f"column {name!r} has dtype {dtype}; groveml takes numeric, boolean or "
                            "categorical columns (NaN / NA = missing)")
    return out


def _arrow_values(table, feature_names, feature_types, categories, what) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc
    columns = list(table.schema.names)
    _check_columns(columns, feature_names, what)
    types = list(feature_types) if len(feature_types) == len(feature_names) else [None] * len(
        feature_names)
    arrays = [table.column(columns.index(n)) for n in feature_names]
    all_f32 = all(a.type == pa.float32() for a in arrays)
    out = np.empty((table.num_rows, len(feature_names)), dtype=np.float32 if all_f32 else np.float64)
    target = pa.float32() if all_f32 else pa.float64()
    for j, (name, a) in enumerate(zip(feature_names, arrays)):
        t = a.type
        if pa.types.is_dictionary(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
            if pa.types.is_dictionary(t) or (types[j] == "c" and (categories is None
                                                                   or name in categories)):
                series = a.to_pandas()
                if pa.types.is_dictionary(t) and not hasattr(series, "cat"):
                    series = series.astype("category")
                out[:, j] = _category_codes(series, name, types[j], categories)
                continue
            raise TypeError(f"column {name!r} has Arrow type {t}; groveml takes numeric, boolean or "
                            "dictionary (categorical) columns (null = missing)")
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
                or pa.types.is_null(t)):
            raise TypeError(f"column {name!r} has Arrow type {t}; groveml takes numeric, boolean or "
                            "dictionary (categorical) columns (null = missing)")
        filled = pc.fill_null(pc.cast(a, target, safe=False), float("nan"))
        out[:, j] = filled.to_numpy(zero_copy_only=False)
    return out

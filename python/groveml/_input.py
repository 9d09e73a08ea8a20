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

import numbers
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np


class Rows:
    """Rows ready for the engines: `values` (n, F), float32 or float64, C-contiguous; `index`,
    the index of a pandas result (a DataFrame's index, a Series' name), else None; `source`,
    "numpy", "pandas" or "arrow" (the kind of result "auto" gives); `original`, the input as
    given (for original_values)."""

    __slots__ = ("values", "_index", "source", "original")

    def __init__(self, values: np.ndarray, index: Any = None, source: str = "numpy",
                 original: Any = None):
        self.values, self._index, self.source, self.original = values, index, source, original

    @property
    def index(self):
        if callable(self._index):  # made when a result needs it (a one-label Index: ~10 us)
            self._index = self._index()
        return self._index


class FrameLayouts:
    """Where a model's features are among a frame's columns, kept per column list (a bounded
    number of them): a service that sends frames of the same columns has them matched by name
    once, not on every call."""

    MOST = 64

    def __init__(self):
        self._positions = {}

    def positions(self, columns: list, feature_names: Sequence[str], what: str):
        """The column of each feature (an int array), or None when the columns are the features
        in the model's order and nothing else. Raises as _check_columns does."""
        key = tuple(columns)
        try:
            return self._positions[key]
        except KeyError:
            pass
        names = [str(c) for c in columns]
        _check_columns(names, feature_names, what)
        where = {c: i for i, c in enumerate(names)}
        positions = np.array([where[n] for n in feature_names], dtype=np.intp)
        if len(names) == len(feature_names) and (positions == np.arange(len(names))).all():
            positions = None
        if len(self._positions) >= self.MOST:
            self._positions.clear()
        self._positions[key] = positions
        return positions


def prepare(x, feature_names: Sequence[str], feature_types: Sequence[str],
            categories: Optional[Dict[str, list]], what: str = "X",
            layouts: Optional[FrameLayouts] = None) -> Rows:
    """Rows of `x` (numpy array, pandas DataFrame, pyarrow Table or RecordBatch; one row as a
    1-D array, a pandas Series or a dict {feature: value}) for a model with these features.
    `categories`: {feature: the model's categories in code order} (empty: the model stores none),
    or None where they are not known, and categorical columns are then refused. `layouts`: the
    caller's cache of frame layouts. Raises ValueError (shapes, missing columns) or TypeError
    (column types) naming what is wrong, and `what` the input is ("X", "background")."""
    if isinstance(x, np.ndarray):
        return Rows(_array_values(x, len(feature_names), what), None, "numpy", x)
    # A DataFrame, a Series or an Arrow table exists only where its library is imported already.
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(x, pd.DataFrame):
        return Rows(_frame_values(x, feature_names, feature_types, categories, what,
                                  layouts or FrameLayouts()), x.index, "pandas", x)
    if pd is not None and isinstance(x, pd.Series):
        return Rows(_series_values(x, feature_names, feature_types, categories, what,
                                   layouts or FrameLayouts()),
                    lambda: pd.RangeIndex(1) if x.name is None else pd.Index([x.name]), "pandas",
                    x)
    if isinstance(x, Mapping):
        return Rows(_record_values(x, feature_names, feature_types, categories, what), None,
                    "numpy", x)
    pa = sys.modules.get("pyarrow")
    if pa is not None and isinstance(x, (pa.Table, pa.RecordBatch)):
        return Rows(_arrow_values(x, feature_names, feature_types, categories, what), None,
                    "arrow", x)
    return Rows(_array_values(x, len(feature_names), what), None, "numpy", x)


def original_values(rows: Rows, feature_names: Sequence[str]) -> np.ndarray:
    """The input's feature values as it gave them, (rows, F) in the model's order: category labels
    and booleans as they are (an object array where the columns' types differ), as shap's
    TreeExplainer puts a DataFrame's `values` in Explanation.data."""
    x = rows.original
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(x, pd.DataFrame):
        where = {str(c): i for i, c in enumerate(x.columns)}
        return x.iloc[:, [where[n] for n in feature_names]].to_numpy()
    if pd is not None and isinstance(x, pd.Series):
        x = dict(zip(map(str, x.index.tolist()), x.tolist()))
    if isinstance(x, Mapping):
        row = [x[n] for n in feature_names]
        numeric = all(isinstance(v, (numbers.Real, type(None))) for v in row)
        return np.array([row], dtype=np.float64 if numeric else object)
    pa = sys.modules.get("pyarrow")
    if pa is not None and isinstance(x, (pa.Table, pa.RecordBatch)):
        return x.select(list(feature_names)).to_pandas().to_numpy()
    x = np.asarray(x)
    return x.reshape(1, -1) if x.ndim == 1 else x


def _array_values(x, num_features: int, what: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        if hasattr(x, "__array__") or isinstance(x, (list, tuple)):
            x = np.asarray(x)
        else:
            raise TypeError(f"{what} must be a numpy array, a pandas DataFrame or Series, a dict "
                            f"or a pyarrow Table / RecordBatch (got {type(x).__name__})")
    if x.ndim == 1:
        if x.shape[0] != num_features:
            raise ValueError(f"{what} is one row of {x.shape[0]} values (a 1-D array); the model "
                             f"has {num_features} features")
        x = x.reshape(1, -1)
    if x.ndim != 2:
        raise ValueError(f"{what} must be 2-D (rows x {num_features} features), or 1-D for one "
                         f"row; got shape {x.shape}")
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


def _series_values(series, feature_names, feature_types, categories, what,
                   layouts: FrameLayouts) -> np.ndarray:
    """One row from a Series indexed by feature names: a Series of numbers as a row of a numeric
    DataFrame, any other (object: numbers and labels) as a dict."""
    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "fiub":
        positions = layouts.positions(series.index.tolist(), feature_names, what)
        values = series.to_numpy(dtype=np.float32 if dtype == np.float32 else np.float64)
        return np.ascontiguousarray(values if positions is None else values[positions])[None]
    return _record_values(dict(zip(series.index.tolist(), series.tolist())), feature_names,
                          feature_types, categories, what)


def _record_values(record: Mapping, feature_names, feature_types, categories,
                   what: str) -> np.ndarray:
    """One row from {feature name: value}: numbers (None and NaN missing) as a DataFrame's
    numeric column (category codes for a categorical feature), strings of a categorical feature
    as its category labels; a number for a feature whose categories are numbers is refused (a
    category or a code?). Other keys are ignored, as a DataFrame's other columns."""
    missing = [n for n in feature_names if n not in record]
    if missing:
        names = [str(k) for k in record]
        if any(n in names for n in missing):  # keys that are not strings (a Series of ints)
            record = dict(zip(names, record.values()))
        else:
            _check_columns(names, feature_names, what)
    row = [record[n] for n in feature_names]
    for name, value in zip(feature_names, row):
        known = (categories or {}).get(name)
        if known and isinstance(value, numbers.Real) and not isinstance(value, bool) and \
                value == value and all(isinstance(c, numbers.Real) for c in known):
            raise TypeError(
                f"feature {name!r} is categorical and its categories are numbers ({_short(known)}):"
                f" in one row the number {value!r} could be a category or a code; give a one-row "
                "DataFrame with a categorical column, or the row as an array of codes")
    try:
        values = np.array([row], dtype=np.float64)
        if values.shape == (1, len(feature_names)):
            return values
    except (TypeError, ValueError):
        pass
    if any(hasattr(v, "__len__") and not isinstance(v, str) for v in row):
        raise TypeError(f"{what} is a dict of one row, {{feature: value}}; it holds sequences "
                        "(columns?): give several rows as a DataFrame (pandas.DataFrame(d))")
    import pandas as pd
    frame = pd.DataFrame({n: [v] for n, v in zip(feature_names, row)}, dtype=object)
    frame = frame.infer_objects()
    return _frame_values(frame, feature_names, feature_types, categories, what, FrameLayouts())


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


class Categories(dict):
    """{feature: the model's categories in code order}, with `unknown`: what a value that is not
    one of them becomes, as the model's library makes it ("missing" for LightGBM, whose pandas
    recoding gives it code -1; "error" for XGBoost, which refuses a category not in the training
    set), as groved and `grove` do (core/model/category_codes.h)."""

    def __init__(self, categories=(), unknown: str = "missing"):
        super().__init__(categories)
        self.unknown = unknown
        # {feature: names -> codes} for features whose categories the model records as hashes
        # of their names (CatBoost's one-hot and CTR features; their entry above is an empty list).
        self.hashed = {}


def unknown_rule(model_format: str) -> str:
    """The unknown-category rule of a model format ("xgboost_json", "lightgbm_text", ...)."""
    return "error" if str(model_format).lower().startswith("xgboost") else "missing"


def _category_codes(values, name: str, feature_type: Optional[str],
                    categories: Optional[Dict[str, list]]):
    """Category codes (float64, NaN = missing or, unless `categories.unknown` is "error", unknown)
    of a pandas Categorical / object Series:
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
    hashed = getattr(categories, "hashed", {}).get(name)
    if hashed is not None:
        # Names hashed as CatBoost hashes them (integers by their decimal text, the empty string
        # like any other, as `grove` and groved code a CSV's empty cell); CatBoost refuses a
        # missing value (None, NaN) in a categorical column, and so does groveml.
        given = np.asarray(values, dtype=object)
        missing = np.asarray(pd.isna(given), dtype=bool)
        if missing.any():
            row = int(np.argmax(missing))
            raise ValueError(
                f"feature {name!r}, row {row}: a missing value ({given[row]!r}) in a CatBoost "
                "categorical column (CatBoost refuses one): give a category name; the empty "
                "string \"\" is a name like any other")
        return np.asarray(hashed([v if isinstance(v, str) else str(v) for v in given]),
                          dtype=np.float64)
    if known is not None and len(known) == 0:
        raise TypeError(
            f"feature {name!r} records its categories as hashes of their names (CatBoost), and "
            "no coder of them is known here: use groveml.Model in process or groveml.Client "
            "(which codes them by the hashes the server's metadata lists), or send the names "
            "to the server (KServe BYTES tensors, grove.v1 category_columns, `grove --server` "
            "with a CSV)")
    if known is not None:
        # The position of each value among the model's categories, -1 for a missing or unknown
        # one (pandas.Categorical(values, categories=known) gives the same codes, but warns on
        # an unknown value and is to refuse it).
        index = pd.Index(known)
        given = np.asarray(values, dtype=object)
        lookup = given
        if len(known) and not any(isinstance(k, str) for k in known):
            # Number categories named by text (Spark's strings, CSV cells): by value, "10" and
            # "10.0" alike, as groved and `grove` read them; the empty string is missing, text
            # that is not a number an unknown category.
            given = np.where(given == "", None, given)
            lookup = pd.to_numeric(pd.Series(given, dtype=object), errors="coerce").to_numpy()
        codes = (index.get_indexer(lookup) if index.is_unique
                 else pd.Categorical(lookup, categories=known).codes)
        if getattr(categories, "unknown", "missing") == "error":
            unknown = (codes < 0) & ~np.asarray(pd.isna(given), dtype=bool)
            if unknown.any():
                value = given[np.argmax(unknown)]
                raise ValueError(
                    f"feature {name!r}: {value!r} is not one of the {len(known)} categories the "
                    "model was trained with (XGBoost refuses a category not in the training set; "
                    "Model.categories lists them)")
    elif isinstance(getattr(values, "dtype", None), pd.CategoricalDtype):
        codes = values.cat.codes.to_numpy()
    else:
        raise TypeError(f"column {name!r} holds {getattr(values, 'dtype', 'strings')} values and "
                        "the model stores no categories to map them to; give the category codes "
                        "or a categorical dtype")
    out = codes.astype(np.float64)
    out[codes < 0] = np.nan
    return out


def _numeric_frame_dtype(df):
    """float32 when every column of df is a numpy float32 column, float64 when every column is
    a numpy number or boolean, else None. Read from pandas' blocks (one dtype per block, few per
    frame) rather than df.dtypes, which builds a Series on every call (about 15 us, the whole
    budget of a one-row call); a pandas without blocks takes the general path."""
    blocks = getattr(getattr(df, "_mgr", None), "blocks", None)
    if blocks is None:
        return None
    all_f32 = True
    for block in blocks:
        dtype = block.dtype
        if not isinstance(dtype, np.dtype) or dtype.kind not in "fiub":
            return None
        all_f32 = all_f32 and dtype == np.float32
    return np.float32 if all_f32 else np.float64


def _names_categories(name, feature_type, categories) -> bool:
    """Whether a column of strings for feature `name` holds category names: the model records
    the feature's categories (XGBoost types it "c"; LightGBM types no feature, but records the
    categories of its pandas categorical columns, and Spark turns those into strings), or types
    it categorical without known categories (then refused, asking for them)."""
    if categories is not None and name in categories:
        return True
    return feature_type == "c" and categories is None


def _frame_values(df, feature_names, feature_types, categories, what,
                  layouts: FrameLayouts) -> np.ndarray:
    positions = layouts.positions(df.columns.tolist(), feature_names, what)
    dtype = _numeric_frame_dtype(df)
    if dtype is not None:
        # Numbers and booleans only: one conversion of the whole frame, then the features.
        values = df.to_numpy(dtype=dtype)
        return np.ascontiguousarray(values if positions is None else values[:, positions])
    import pandas as pd
    if positions is None:
        positions = np.arange(len(feature_names))
    types = list(feature_types) if len(feature_types) == len(feature_names) else [None] * len(
        feature_names)
    dtypes = df.dtypes.tolist()
    numeric, recoded = [], []
    for j, (name, p) in enumerate(zip(feature_names, positions)):
        dtype = dtypes[p]
        if isinstance(dtype, pd.CategoricalDtype):
            recoded.append(j)
        elif pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
            numeric.append(j)
        elif _names_categories(name, types[j], categories) and (
                pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype)):
            recoded.append(j)
        else:
            raise TypeError(f"column {name!r} has dtype {dtype}; groveml takes numeric, boolean or "
                            "categorical columns (NaN / NA = missing)")
    all_f32 = not recoded and all(dtypes[positions[j]] == np.float32 for j in numeric)
    out = np.empty((len(df), len(feature_names)), dtype=np.float32 if all_f32 else np.float64)
    if numeric:
        # Every numeric column in one conversion (nullable ones: NA becomes NaN).
        out[:, numeric] = df.iloc[:, positions[numeric]].to_numpy(dtype=out.dtype,
                                                                  na_value=np.nan)
    for j in recoded:  # each categorical column against its own categories
        out[:, j] = _category_codes(df.iloc[:, positions[j]], feature_names[j], types[j],
                                    categories)
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
            if pa.types.is_dictionary(t) or _names_categories(name, types[j], categories):
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

"""groveml.Model: a model file explained and predicted inside this Python process."""

import hashlib
import json
import os
import sys
import threading
from typing import Optional, Sequence, Tuple

import numpy as np

from . import _boosters, _core, _input, _output, _sklearn
from ._groups import group_members

METHODS = ("path_dependent", "interventional")
OUTPUT_SPACES = ("margin", "probability", "probability_linearized")
ATTRIBUTIONS = tuple(_core.attributions)  # the core's name table (core/model/outputs.h)
KINDS = ("prediction", "margin", "leaf")


class Model:
    """A tree ensemble (XGBoost JSON / UBJSON, LightGBM text, CatBoost JSON, a Treelite
    checkpoint) loaded into Grove's engines.

    Model(path, device="auto", threads=0, strategy="auto", background=None);
    Model.from_booster(booster, ...) for a live XGBoost / LightGBM model; Model.from_sklearn(est)
    for a scikit-learn forest; Model.from_bytes(data). save(path) writes the model file, which
    groved serves.

    device: "auto" runs on a GPU when this build has the CUDA engines and one is visible, "cpu"
    never does, "cuda" requires one. threads: CPU threads (0 = one per core). strategy: the
    engines' strategy ("auto", "cpu", or a name, as `grove --strategy`). background: a default
    background data set (array, DataFrame, Arrow table, or a CSV / .npy file) for
    method="interventional".

    Every call gives the numbers `grove predict` / `grove explain` give for the same rows, bit for
    bit; the engines run without the GIL, so threads may call one Model concurrently. A Model
    pickles as its model bytes and options (it keeps the bytes it was built from).
    """

    def __init__(self, path, device: str = "auto", threads: int = 0, strategy: str = "auto",
                 background=None):
        if _boosters.library(path) is not None:
            raise TypeError(f"groveml.Model(path) takes a model file; for a live "
                            f"{type(path).__name__} use groveml.Model.from_booster(obj)")
        path = os.fspath(path)
        with open(path, "rb") as f:
            data = f.read()
        self._load(data, path, device, threads, strategy, background)

    def _load(self, data: bytes, source: str, device, threads, strategy, background):
        """Builds the engines from the bytes of a model file; the bytes are kept, since a pickled
        Model is re-created from them (the file may be gone or changed by then)."""
        engine = _core.Engine.from_bytes(data, source, device, int(threads), strategy)
        self._bytes = data
        self._engine = engine
        self.path = source
        self.device = device
        self.threads = int(threads)
        self.strategy = strategy
        self.feature_names = list(engine.feature_names)
        self.feature_types = list(engine.feature_types)
        self.num_features = engine.num_features
        self.num_outputs = engine.num_outputs
        self.num_trees = engine.num_trees
        self.num_iterations = engine.num_iterations
        self.format = engine.format
        self.objective = engine.objective
        self.link = engine.link
        # {feature: categories in code order}, as the model file records them (the C++ loaders
        # read XGBoost's cats.enc and LightGBM's pandas_categorical).
        # An unknown category is missing (LightGBM) or refused (XGBoost), as by the library.
        self.categories = _input.Categories(engine.categories, _input.unknown_rule(self.format))
        # CatBoost's categorical features record hashes of their names: the engine codes the names.
        self.categories.hashed = {
            name: (lambda names, f=index: engine.code_names(f, names))
            for name, index in engine.hashed_categories.items()}
        self._background = background
        self._interventional = None  # (key, _core.Interventional): the last background's engine
        self._lock = threading.Lock()
        self._frames = _input.FrameLayouts()

    @classmethod
    def from_bytes(cls, data: bytes, device: str = "auto", threads: int = 0,
                   strategy: str = "auto", background=None, source: str = "<bytes>"):
        """A model from the bytes of a model file (XGBoost JSON / UBJSON, LightGBM text)."""
        model = cls.__new__(cls)
        model._load(bytes(data), source, device, threads, strategy, background)
        return model

    @classmethod
    def from_booster(cls, booster, device: str = "auto", threads: int = 0,
                     strategy: str = "auto", background=None):
        """A model from a live xgboost.Booster, XGBClassifier / XGBRegressor / XGBRanker, a
        lightgbm.Booster or LGBMClassifier / LGBMRegressor / LGBMRanker, through the bytes the
        library saves (XGBoost's UBJSON, LightGBM's model text), without a file: the same model
        as the file the library would save. Other arguments as Model(path)."""
        data, source = _boosters.model_bytes(booster)
        return cls.from_bytes(data, device, threads, strategy, background, source)

    @classmethod
    def from_sklearn(cls, est, device: str = "auto", threads: int = 0, strategy: str = "auto",
                     background=None):
        """A model from a fitted scikit-learn RandomForestClassifier / RandomForestRegressor,
        ExtraTreesClassifier / ExtraTreesRegressor, GradientBoostingClassifier /
        GradientBoostingRegressor or HistGradientBoostingClassifier / HistGradientBoostingRegressor,
        written as a Treelite checkpoint (groveml/_sklearn.py: the node sample counts are the
        covers, so path-dependent SHAP is shap.TreeExplainer's). Predictions are predict() for
        regressors, predict_proba() for classifiers (one column, P(class 1), for a binary
        GradientBoosting / HistGradientBoosting model); margins are decision_function().
        save("checkpoint.tl") writes the file for groved. Other arguments as Model(path)."""
        data, source = _sklearn.checkpoint_bytes(est)
        return cls.from_bytes(data, device, threads, strategy, background, source)

    def save(self, path) -> None:
        """Writes the model file this Model was built from (the bytes it keeps): a Treelite
        checkpoint for from_sklearn (name it checkpoint.tl in a model repository), XGBoost's
        UBJSON or LightGBM's text for from_booster, the file itself otherwise."""
        with open(os.fspath(path), "wb") as f:
            f.write(self._bytes)

    def __reduce__(self):
        # Re-created from the model's bytes and options: picklable to Spark, Dask and joblib
        # workers; the engines are rebuilt where it is unpickled (the GPU there, if any).
        return (_restore, (self._bytes, self.path, self.device, self.threads, self.strategy,
                           self._background))

    def __repr__(self):
        return (f"groveml.Model({self.path!r}, {self.format}, {self.num_features} features, "
                f"{self.num_outputs} outputs, {self.num_trees} trees)")

    def describe(self) -> dict:
        """The model's statistics (as `grove inspect`) and the engines that serve it."""
        out = dict(self._engine.stats())
        out.update(dict(self._engine.describe()))
        return out

    # ---- prediction -----------------------------------------------------------------------------

    def predict(self, X, kind: str = "prediction", iteration_range: Tuple[int, int] = (0, 0),
                output_format: str = "auto", progress: bool = False):
        """Predictions of the rows of X (numpy, pandas, pyarrow; one row as a 1-D array, a pandas
        Series or a dict {feature: value}).

        kind: "prediction" (transformed: probabilities, ...), "margin" or "leaf" (leaf ids).
        Returns (rows,) for one column, (rows, columns) otherwise (leaf ids as int32), or a
        DataFrame / Arrow table (columns as `grove --output-header` names them) for DataFrame /
        Arrow input or output_format="pandas" / "arrow"."""
        _output.check_format(output_format, _output.PREDICT_FORMATS)
        rows = self.rows(X)
        out = self.predict_matrix(rows, kind, iteration_range, progress)
        return _output.predict_result(out, kind, _output.resolved_format(output_format, rows.source),
                                      self.feature_names, self.num_outputs, rows)

    def predict_matrix(self, rows: "_input.Rows", kind: str = "prediction",
                       iteration_range: Tuple[int, int] = (0, 0), progress: bool = False):
        """The flat float32 result matrix `grove predict` writes, for prepared rows."""
        _output.check_choice("kind", kind, KINDS)
        begin, end = _range(iteration_range)
        width = self._engine.predict_width(kind, begin, end)
        return self._run(rows.values, width, "predict", progress,
                         lambda x, out: self._engine.predict(x, out, kind, begin, end))

    def predict_row(self, row, kind: str = "prediction", iteration_range: Tuple[int, int] = (0, 0),
                    out=None):
        """One row, for callers that answer a row at a time (microseconds, no thread hop).

        row: a 1-D float32 C-contiguous numpy array of num_features values (NaN missing), used
        without a copy; other inputs are converted (which costs a copy). out: an optional 1-D
        float32 array of the result's width, filled in place (no allocation per call).
        Returns out (or a new array). Categorical columns must already hold the model's category
        codes: use predict() for frames."""
        if not (isinstance(row, np.ndarray) and row.dtype == np.float32 and row.ndim == 1
                and row.flags.c_contiguous):
            row = np.ascontiguousarray(row, dtype=np.float32).reshape(-1)
        begin, end = iteration_range
        if out is None:
            out = np.empty(self._engine.predict_width(kind, int(begin), int(end)), np.float32)
        self._engine.predict_row(row, out, kind, int(begin), int(end))
        return out

    # ---- explanation ----------------------------------------------------------------------------

    def explain(self, X, interactions: bool = False, top_k: Optional[int] = None,
                method: Optional[str] = None, background=None, output_space: str = "margin",
                iteration_range: Tuple[int, int] = (0, 0), output_format: str = "auto",
                progress: bool = False, attribution: str = "shapley", residuals: bool = False,
                groups=None):
        """SHAP values of the rows of X (numpy, pandas, pyarrow; one row as a 1-D array, a pandas
        Series or a dict {feature: value}).

        interactions: SHAP interaction values instead. top_k: only the k >= 1 features with the
        largest |SHAP value| per row (a TopFeatures, or a DataFrame / Arrow table); not with
        interactions (a ValueError: ask for each in its own call).
        method: "path_dependent" (the trees' covers; default) or "interventional" (over
        `background`, or the Model's; a background alone implies it), output_space: "margin",
        "probability" or "probability_linearized" (interventional only). attribution: "shapley"
        (SHAP values), "banzhaf" (Banzhaf values of the same method and space, in the same
        layout; not additive: a row's values and bias do not sum to its output) or "saabas"
        (Saabas attributions, XGBoost's approx_contribs: path-dependent values only, additive).
        groups: {name: [feature names or indices]}: the values of these feature groups (the
        game whose players are the groups; every feature in no group is its own, named by
        itself), F being their number and the result's feature names theirs, ordered by their
        smallest member (groveml.Model.groups says the order); a ValueError names what is wrong.
        Returns XGBoost's shapes ((rows, F+1), (rows, outputs, F+1), interactions (rows, F+1, F+1)
        ...; bias last), a DataFrame / Arrow table (DataFrame / Arrow input, or output_format=
        "pandas" / "arrow"), or a shap.Explanation (output_format="shap").
        residuals: a groveml.Explanation instead, that result with each row's additivity residual
        per output (against the model's margin, or its prediction in the probability spaces) and
        the arithmetic used; not with top_k."""
        _output.check_format(output_format)
        _output.check_top_k(top_k, interactions)
        _output.check_residuals(residuals, top_k)
        rows = self.rows(X)
        out = self.explain_matrix(rows, interactions, method, background, output_space,
                                  iteration_range, progress, attribution, groups)
        fmt = _output.resolved_format(output_format, rows.source)
        names = self.feature_names if groups is None else [n for n, _ in self.groups(groups)]
        if top_k is not None:
            top = _output.top_k(out, self.num_outputs, names, top_k)
            return _output.top_result(top, fmt, rows)
        result = _output.explain_result(out, interactions, fmt, names, self.num_outputs, rows)
        if not residuals:
            return result
        kind = "margin" if output_space == "margin" else "prediction"
        outputs = self.predict_matrix(rows, kind, iteration_range)
        if outputs.shape[1] != self.num_outputs:
            raise ValueError(f"residuals compare each of the {self.num_outputs} outputs with the "
                             f"model's, but its {kind} has {outputs.shape[1]} values per row")
        return _output.Explanation(
            result, _output.residual_result(_output.residuals_of(out, outputs, self.num_outputs),
                                            self.num_outputs),
            _core.residual_arithmetic)

    def groups(self, groups):
        """[(name, [member feature indices])] of `groups` ({name: [feature names or indices]})
        resolved against the model, in the order of the explanation's columns: every feature in
        no group is its own group; groups are ordered by their smallest member. ValueError
        naming what is wrong (an unknown feature, a feature in two groups, ...)."""
        return [(name, list(members))
                for name, members in self._engine.groups(_groups_json(groups))]

    def explain_matrix(self, rows: "_input.Rows", interactions: bool = False,
                       method: Optional[str] = None, background=None,
                       output_space: str = "margin", iteration_range: Tuple[int, int] = (0, 0),
                       progress: bool = False, attribution: str = "shapley", groups=None):
        """The flat float32 result matrix `grove explain` writes, for prepared rows."""
        groups_json = _groups_json(groups)
        begin, end = _range(iteration_range)
        interactions = bool(interactions)
        given_background = background is not None
        if background is None:
            background = self._background
        if method is None:
            # The Model's own background does not make Saabas attributions (path-dependent only)
            # interventional; a background given to this call does, and is refused as such.
            default_only = attribution == "saabas" and not given_background
            method = ("interventional" if background is not None and not default_only
                      else "path_dependent")
        _output.check_choice("method", method, METHODS)
        _output.check_choice("output_space", output_space, OUTPUT_SPACES)
        _output.check_choice("attribution", attribution, ATTRIBUTIONS)
        width = self._engine.explain_width(interactions, groups_json)
        label = "interactions" if interactions else "explain"
        if method == "path_dependent":
            if output_space != "margin":
                raise ValueError(f"output_space={output_space!r} needs method='interventional' "
                                 "(path-dependent SHAP explains the margin)")
            return self._run(rows.values, width, label, progress,
                             lambda x, out: self._engine.explain(x, out, interactions, attribution,
                                                                 begin, end, groups_json))
        if background is None:
            raise ValueError("method='interventional' needs a background data set (background=, "
                             "or Model(..., background=))")
        engine = self.interventional_engine(background)
        return self._run(rows.values, width, label, progress,
                         lambda x, out: engine.explain(x, out, output_space, interactions,
                                                       attribution, begin, end, groups_json))

    def interventional_engine(self, background):
        """The interventional engine over `background` (a file path, or rows as X takes them);
        the last one is kept, since preprocessing a background costs more than a small call."""
        if isinstance(background, (str, os.PathLike)):
            path = os.fspath(background)
            key = ("file", path, os.stat(path).st_mtime_ns)
            values = None
        else:
            values = np.ascontiguousarray(self.rows(background, "background").values,
                                          dtype=np.float64)
            key = ("rows", values.shape, hashlib.sha256(values.tobytes()).hexdigest())
        with self._lock:
            if self._interventional is not None and self._interventional[0] == key:
                return self._interventional[1]
        if values is None:
            engine = _core.Interventional.from_file(self._engine, path)
        else:
            engine = _core.Interventional.from_rows(self._engine, values)
        with self._lock:
            self._interventional = (key, engine)
        return engine

    # ---- shared -------------------------------------------------------------------------------

    def rows(self, X, what: str = "X") -> "_input.Rows":
        """X as the engines take it (see groveml._input): raises ValueError / TypeError naming
        a missing column, a wrong shape or an unusable type (of `what`)."""
        return _input.prepare(X, self.feature_names, self.feature_types, self.categories, what,
                              self._frames)

    def chunk_rows(self, width: int) -> int:
        return _core.chunk_rows(self.num_features, width)

    def _run(self, values, width, label, progress, call):
        """Calls the engine on the CLI's chunks of rows (AutoChunkRows: the same batches, so the
        same strategy choices), each writing its slice of one result matrix."""
        n = values.shape[0]
        out = np.empty((n, width), dtype=np.float32)
        step = self.chunk_rows(width)
        bar = _Progress(label, n) if progress else None
        for begin in range(0, n, step):
            call(values[begin:begin + step], out[begin:begin + step])
            if bar is not None:
                bar.update(min(n, begin + step))
        if bar is not None:
            bar.close()
        return out


def _restore(data, source, device, threads, strategy, background):
    return Model.from_bytes(data, device, threads, strategy, background, source)


def _range(iteration_range: Sequence[int]):
    begin, end = iteration_range
    return int(begin), int(end)


class _Progress:
    """A progress bar over rows: tqdm's when installed, else a line on stderr."""

    def __init__(self, label, total):
        self.done = 0
        try:
            from tqdm.auto import tqdm
            self.bar = tqdm(total=total, desc=label, unit="rows")
        except ImportError:
            self.bar = None
            self.label, self.total = label, total

    def update(self, done):
        if self.bar is not None:
            self.bar.update(done - self.done)
        else:
            sys.stderr.write(f"\r{self.label}: {done}/{self.total} rows")
        self.done = done

    def close(self):
        if self.bar is not None:
            self.bar.close()
        else:
            sys.stderr.write("\n")


def _groups_json(groups) -> str:
    """The JSON text of feature groups ({name: [feature names or indices]}) the engines parse;
    "" for None (the model's features)."""
    members = group_members(groups)
    return "" if members is None else json.dumps(dict(members))

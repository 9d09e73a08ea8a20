"""groveml.Client: predictions and explanations from a running groved (grove.v1 over gRPC).

Rows travel in the raw form (Matrix.raw_f32 for float32 input, raw_f64 for the rest, converted by
the server as `grove` converts doubles), and results come back as raw_f32, so that a call costs
one copy each way. An explanation larger than one request streams its requests over one
ExplainStream call. Columns of a DataFrame / Arrow table are matched to the feature names in the
model's metadata, and results take the same shapes and formats as groveml.Model's.

Categorical columns (pandas category, Arrow dictionary, strings for a categorical feature) are
recoded by the model's categories as groveml.Model recodes them: those the server's metadata lists
(the categories the model file records), or those given with categories= ({feature: categories in
the model's order}, as groveml.Model(path).categories holds them), which take precedence. A model
whose file records none (trained without a DataFrame) has its categorical columns refused unless
categories= is given: a column's own codes would name other categories whenever it holds a subset
of the model's, or another order.
"""

import os
from typing import Dict, Optional, Tuple

import numpy as np

from . import _core, _input, _output
from ._groups import group_members
from .model import ATTRIBUTIONS, KINDS, METHODS, OUTPUT_SPACES

_SPACES = {"margin": 0, "probability": 1, "probability_linearized": 2}
_OUTPUTS = {"margin": 1, "prediction": 2, "leaf": 3}


def _read(path):
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


def _hashed_coder(hashes):
    """Names -> codes of a feature whose categories are hashes of their names (in code order):
    the position of the name's hash, len(hashes) for a hash not listed, as groved codes it."""
    position = {}
    for i, h in enumerate(hashes):
        position.setdefault(int(h), i)
    return lambda names: [position.get(h, len(hashes))
                          for h in _core.catboost_category_hashes(list(names))]


class Client:
    """Client("host:port", token=None, tls=False, tls_ca=None, tls_cert=None, tls_key=None,
    tls_server_name=None, timeout=None)

    token: bearer token (groved --auth_token_file); $GROVE_TOKEN when not given, as `grove`.
    tls: a TLS channel (implied by any tls_* file): tls_ca PEM roots to verify the server with
    (system roots when None), tls_cert + tls_key a client certificate (mutual TLS).
    timeout: seconds per call (None: no deadline). Thread-safe, like the grpc channel it holds."""

    def __init__(self, target: str, token: Optional[str] = None, tls: bool = False,
                 tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None, tls_server_name: Optional[str] = None,
                 timeout: Optional[float] = None, max_message_bytes: int = 1 << 30):
        import grpc
        from ._pb import grove_pb2, grove_pb2_grpc
        self._grpc = grpc
        self._pb = grove_pb2
        options = [("grpc.max_send_message_length", max_message_bytes),
                   ("grpc.max_receive_message_length", max_message_bytes)]
        if tls or tls_ca or tls_cert or tls_key:
            creds = grpc.ssl_channel_credentials(root_certificates=_read(tls_ca),
                                                 private_key=_read(tls_key),
                                                 certificate_chain=_read(tls_cert))
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override", tls_server_name))
            self._channel = grpc.secure_channel(target, creds, options)
        else:
            self._channel = grpc.insecure_channel(target, options)
        self._stub = grove_pb2_grpc.GroveStub(self._channel)
        token = token if token is not None else os.environ.get("GROVE_TOKEN")
        self._call_metadata = (("authorization", f"Bearer {token}"),) if token else None
        self.timeout = timeout
        self.target = target
        self._max_message_bytes = max_message_bytes
        self._metadata = {}

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request):
        return method(request, timeout=self.timeout, metadata=self._call_metadata)

    # ---- models -------------------------------------------------------------------------------

    def list_models(self):
        """[(name, ready)] of the server's repository."""
        response = self._call(self._stub.ListModels, self._pb.ListModelsRequest())
        return [(m.name, m.ready) for m in response.models]

    def metadata(self, model: str, version: int = 0, refresh: bool = False):
        """The grove.v1.ModelMetadata of a model (cached per model and version)."""
        key = (model, version)
        if refresh or key not in self._metadata:
            request = self._pb.GetModelMetadataRequest(model=model, version=version)
            self._metadata[key] = self._call(self._stub.GetModelMetadata, request)
        return self._metadata[key]

    def model(self, name: str, version: int = 0,
              categories: Optional[Dict[str, list]] = None) -> "RemoteModel":
        """The served model `name` with groveml.Model's predict / explain (`categories` as
        predict's, for every call)."""
        return RemoteModel(self, name, version, categories)

    def feature_names(self, model: str, version: int = 0):
        meta = self.metadata(model, version)
        if len(meta.feature_names) == meta.num_features:
            return list(meta.feature_names)
        return [f"f{i}" for i in range(meta.num_features)]  # XGBoost's defaults, as `grove`

    def _rows(self, model, version, X, categories):
        meta = self.metadata(model, version)
        names = self.feature_names(model, version)
        if categories is not None:
            if not isinstance(categories, dict):
                raise TypeError("categories must be a dict {feature name: categories in the "
                                f"model's order}} (got {type(categories).__name__})")
            features = set(names)
            unknown = sorted(str(c) for c in categories if c not in features)
            if unknown:
                raise ValueError(f"categories= names {unknown}, which are not features of model "
                                 f"{model!r} (its features: {names})")
        if categories is None and len(meta.categories) > 0:
            # The categories the served model's file records (groved lists them in its metadata).
            categories = {c.name: list(c.strings) if len(c.strings) else
                          [int(v) if float(v).is_integer() else v for v in c.numbers]
                          for c in meta.categories}
        if categories is not None:  # an unknown category as the model's library treats it
            categories = _input.Categories(categories, _input.unknown_rule(meta.format))
            # CatBoost features: the metadata lists the hashes of their names in code order.
            for c in meta.categories:
                if len(c.hashes) and not categories.get(c.name):
                    categories.hashed[c.name] = _hashed_coder(list(c.hashes))
        # None: the model's categories are not known, and categorical columns are refused.
        return _input.prepare(X, names, list(meta.feature_types), categories)

    def _chunk(self, meta, width):
        """Rows per request: the server's limit, and about 1/4 of the message limit per result."""
        per_row = 4 * max(meta.num_features * 2, width, 1)
        rows = max(1, (self._max_message_bytes // 4) // per_row)
        if meta.max_request_rows > 0:
            rows = min(rows, meta.max_request_rows)
        return rows

    def _matrix(self, values):
        m = self._pb.Matrix(rows=values.shape[0], cols=values.shape[1])
        if values.dtype == np.float32:
            m.raw_f32 = values.astype("<f4", copy=False).tobytes()
        else:
            m.raw_f64 = values.astype("<f8", copy=False).tobytes()
        return m

    # ---- prediction -----------------------------------------------------------------------------

    def predict(self, model: str, X, kind: str = "prediction", version: int = 0,
                iteration_range: Tuple[int, int] = (0, 0), output_format: str = "auto",
                categories: Optional[Dict[str, list]] = None):
        """As groveml.Model.predict, computed by the server's model `model`. categories: the
        model's categories ({feature: categories in code order}, groveml.Model.categories), which
        categorical columns of X need (they are refused without them); a feature it does not name
        takes a column's own codes, as Model does for a model that stores no categories."""
        _output.check_format(output_format, _output.PREDICT_FORMATS)
        _output.check_choice("kind", kind, KINDS)
        rows = self._rows(model, version, X, categories)
        meta = self.metadata(model, version)
        begin, end = (int(v) for v in iteration_range)
        parts = []
        n = rows.values.shape[0]
        step = self._chunk(meta, meta.num_outputs)
        for start in range(0, n, step):
            request = self._pb.PredictRequest(
                model=model, version=version, rows=self._matrix(rows.values[start:start + step]),
                outputs=[_OUTPUTS[kind]], iteration_begin=begin, iteration_end=end)
            response = self._call(self._stub.Predict, request)
            parts.append(_from_matrix(getattr(response, kind)))
        out = np.concatenate(parts) if parts else np.empty((0, 0), np.float32)
        return _output.predict_result(out, kind, _output.resolved_format(output_format,
                                                                         rows.source),
                                      self.feature_names(model, version), meta.num_outputs,
                                      rows)

    # ---- explanation ----------------------------------------------------------------------------

    def explain(self, model: str, X, interactions: bool = False, top_k: Optional[int] = None,
                method: str = "path_dependent", output_space: str = "margin", version: int = 0,
                iteration_range: Tuple[int, int] = (0, 0), output_format: str = "auto",
                background=None, categories: Optional[Dict[str, list]] = None,
                attribution: str = "shapley", residuals: bool = False,
                groups: Optional[Dict[str, list]] = None):
        """As groveml.Model.explain, computed by the server's model `model`. Interventional SHAP
        uses the model's background on the server (background.csv / .npy in the repository).
        categories: as predict's. attribution: one of groveml.model.ATTRIBUTIONS, as
        Model.explain's.
        residuals: a groveml.Explanation with the residuals and arithmetic groved computed
        (ExplainResponse.residuals, residual_arithmetic).
        groups: {name: [feature names or indices]}, as Model.explain's; None: the model's
        groups.json when its repository has one (the result then names its groups), else its
        features."""
        _output.check_format(output_format)
        if background is not None:
            raise ValueError("the server explains over the model's own background (background.csv"
                             " or background.npy beside its versions); background= is for "
                             "groveml.Model")
        _output.check_choice("method", method, METHODS)
        _output.check_choice("output_space", output_space, OUTPUT_SPACES)
        _output.check_choice("attribution", attribution, ATTRIBUTIONS)
        _output.check_top_k(top_k, interactions)
        _output.check_residuals(residuals, top_k)
        rows = self._rows(model, version, X, categories)
        meta = self.metadata(model, version)
        names = self.feature_names(model, version)
        f1 = meta.num_features + 1
        width = meta.num_outputs * f1 * (f1 if interactions else 1)
        begin, end = (int(v) for v in iteration_range)
        request_groups = _group_messages(self._pb, groups)
        values, inter, top_features, top_values, bias = [], [], [], [], None
        residual_parts, arithmetic = [], ""
        n = rows.values.shape[0]
        step = self._chunk(meta, width)

        def requests():
            for sequence, start in enumerate(range(0, n, step)):
                yield self._pb.ExplainRequest(
                    model=model, version=version,
                    rows=self._matrix(rows.values[start:start + step]),
                    interactions=bool(interactions), top_k=int(top_k or 0),
                    omit_values=bool(top_k) and not interactions, iteration_begin=begin,
                    iteration_end=end, method=METHODS.index(method),
                    output_space=_SPACES[output_space],
                    attribution=self._pb.Attribution.Value(
                        "ATTRIBUTION_" + attribution.upper()), sequence=sequence,
                    residuals=bool(residuals), groups=request_groups)

        if n <= step:
            responses = [self._call(self._stub.Explain, request) for request in requests()]
        else:
            # Several requests: one ExplainStream, so that the server computes one message while
            # the next travels; its flow control (at most 4 messages in flight) bounds the memory
            # of both sides, and the generator builds each request only when gRPC asks for it.
            responses = self._call(self._stub.ExplainStream, requests())
        for sequence, response in enumerate(responses):
            if response.sequence != sequence:
                raise RuntimeError(f"ExplainStream answered message {response.sequence} in place "
                                   f"of {sequence}")
            bias = np.asarray(response.bias, dtype=np.float32)
            if residuals:
                residual_parts.append(_from_matrix(response.residuals))
                arithmetic = response.residual_arithmetic
            if response.groups:  # grouped values: the columns are the groups
                names = [g.name for g in response.groups]
                f1 = len(names) + 1
                width = meta.num_outputs * f1 * (f1 if interactions else 1)
            if interactions:
                inter.append(_from_matrix(response.interactions))
            elif not top_k:
                values.append(_from_matrix(response.values))
            if top_k:
                k = response.top.k
                shape = (-1, meta.num_outputs, k)
                top_features.append(np.asarray(response.top.features, np.int32).reshape(shape))
                top_values.append(np.asarray(response.top.values, np.float32).reshape(shape))
        fmt = _output.resolved_format(output_format, rows.source)
        if top_k is not None:
            if n == 0:
                empty = np.zeros((n, meta.num_outputs, 0))
                top_features, top_values = [empty.astype(np.int32)], [empty.astype(np.float32)]
            features = np.concatenate(top_features)
            top_v = np.concatenate(top_values)
            top_names = np.asarray(names, dtype=object)[features]
            if meta.num_outputs == 1:
                features, top_v, top_names = features[:, 0], top_v[:, 0], top_names[:, 0]
            top = _output.TopFeatures(features, top_v, top_names,
                                      bias if bias is not None else np.zeros(meta.num_outputs,
                                                                             np.float32))
            return _output.top_result(top, fmt, rows)
        parts = inter if interactions else values
        out = np.concatenate(parts) if parts else np.empty((0, width), np.float32)
        result = _output.explain_result(out, interactions, fmt, names, meta.num_outputs, rows)
        if not residuals:
            return result
        res = (np.concatenate(residual_parts) if residual_parts
               else np.empty((0, meta.num_outputs), np.float32))
        return _output.Explanation(result, _output.residual_result(res, meta.num_outputs),
                                   arithmetic)


def _group_messages(pb, groups):
    """ExplainRequest.groups of {name: [feature names or indices]} (None: none)."""
    return [pb.FeatureGroup(name=name, features=[m for m in members if isinstance(m, str)],
                            feature_indices=[m for m in members if not isinstance(m, str)])
            for name, members in group_members(groups) or []]


def _from_matrix(m) -> np.ndarray:
    """A result Matrix as a (rows, cols) float32 array (raw_f32, or the repeated values of an
    older server)."""
    if m.raw_f32:
        return np.frombuffer(m.raw_f32, dtype="<f4").astype(np.float32, copy=False).reshape(
            m.rows, m.cols)
    return np.asarray(m.values, dtype=np.float32).reshape(m.rows, m.cols)


class RemoteModel:
    """A served model with groveml.Model's methods (Client.model(name))."""

    def __init__(self, client: Client, name: str, version: int = 0,
                 categories: Optional[Dict[str, list]] = None):
        self.client = client
        self.name = name
        self.version = version
        self.categories = categories
        meta = client.metadata(name, version)
        self.feature_names = client.feature_names(name, version)
        self.feature_types = list(meta.feature_types)
        self.num_features = meta.num_features
        self.num_outputs = meta.num_outputs

    def predict(self, X, **kwargs):
        kwargs.setdefault("categories", self.categories)
        return self.client.predict(self.name, X, version=self.version, **kwargs)

    def explain(self, X, **kwargs):
        kwargs.setdefault("categories", self.categories)
        return self.client.explain(self.name, X, version=self.version, **kwargs)

"""Helpers shared by the tests of deploy/ (tests/deploy/*.py): repository paths, YAML, manifests,
the dashboard's and rules' PromQL, groved's documented metrics and flags, starting groved.

Python 3 standard library only; YAML is parsed with PyYAML when this interpreter has it and
otherwise by Debian's /usr/bin/python3, which always has it (python3-yaml is a dependency of the
yamllint package that scripts/install-deps.sh installs).
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEPLOY = os.path.join(ROOT, "deploy")
OVERLAYS = ("gpu", "cpu")
SKIP = 77  # CTest SKIP_RETURN_CODE


class Failures:
    """Collects check failures so that one run reports all of them."""

    def __init__(self, name, quiet=False):
        self.name = name
        self.quiet = quiet
        self.errors = []
        self.checks = 0

    def check(self, ok, message):
        self.checks += 1
        if not ok:
            self.errors.append(message)
            if not self.quiet:
                print(f"FAIL: {message}", flush=True)
        return ok

    def finish(self):
        if self.errors:
            print(f"{self.name}: {len(self.errors)} of {self.checks} checks failed", flush=True)
            return 1
        print(f"{self.name}: all {self.checks} checks passed", flush=True)
        return 0


def skip(message):
    print(f"SKIP: {message}", flush=True)
    sys.exit(SKIP)


def tool(name, env=None):
    """Path of a command-line tool (env var override, then PATH, then /usr/bin), or None."""
    if env and os.environ.get(env):
        return os.environ[env]
    found = shutil.which(name)
    if found:
        return found
    return f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# ---------------------------------------------------------------------------------------------------
# YAML

def yaml_load_all(text):
    """Every document of a YAML stream, as Python objects (None documents dropped)."""
    try:
        import yaml  # noqa: PLC0415
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except ImportError:
        pass
    helper = ("import json, sys, yaml; "
              "print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d is not None]))")
    for python in ("/usr/bin/python3", "python3"):
        try:
            out = subprocess.run([python, "-c", helper], input=text, capture_output=True, text=True,
                                 check=True)
            return json.loads(out.stdout)
        except (OSError, subprocess.CalledProcessError):
            continue
    raise RuntimeError("no Python with PyYAML found (install python3-yaml)")


def yaml_load(path):
    docs = yaml_load_all(read(path))
    return docs[0] if docs else None


def kustomize(path):
    """Renders a kustomization with `kubectl kustomize`; returns (text, objects)."""
    kubectl = tool("kubectl", "KUBECTL")
    out = subprocess.run([kubectl, "kustomize", path], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {path} failed:\n{out.stderr}")
    return out.stdout, yaml_load_all(out.stdout)


def find(objects, kind, name=None):
    for o in objects:
        if o.get("kind") == kind and (name is None or o["metadata"]["name"] == name):
            return o
    return None


def container_env(container):
    """name -> value of a container's env (valueFrom entries map to the dict under valueFrom)."""
    env = {}
    for e in container.get("env", []):
        env[e["name"]] = e["value"] if "value" in e else e.get("valueFrom")
    return env


# ---------------------------------------------------------------------------------------------------
# Entry point and flags

ENTRYPOINT = os.path.join(DEPLOY, "docker", "groved-entrypoint.sh")


def entrypoint_table():
    """GROVE_* variable -> groved flag, as the image's entry point maps them."""
    out = subprocess.run(["sh", ENTRYPOINT, "--print-flags"], capture_output=True, text=True, check=True)
    table = {}
    for line in out.stdout.splitlines():
        var, flag = line.split()
        table[var] = flag
    return table


def documented_flags():
    """Flag names of docs/operations.md's flags table."""
    flags = []
    for line in read(os.path.join(ROOT, "docs", "operations.md")).splitlines():
        if line.startswith("| `--"):
            first_cell = line.split("|")[1]
            flags += re.findall(r"`--([a-z0-9_]+)`", first_cell)
    return flags


def helpfull_flags(groved):
    """{flag: default} of `groved --helpfull` (Abseil's format: `--name (help); default: value;`)."""
    out = subprocess.run([groved, "--helpfull"], capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    flags = {}
    for m in re.finditer(r"--([A-Za-z0-9_]+) \((.*?)\);\s+default: (.*?);", text, re.S):
        default = m.group(3).strip()
        if default.startswith('"') and default.endswith('"'):
            default = default[1:-1]
        flags[m.group(1)] = default
    return flags, text


# ---------------------------------------------------------------------------------------------------
# Metrics, PromQL

def documented_metrics():
    """{metric family: {labels}} from the tables of docs/metrics.md."""
    metrics = {}
    for line in read(os.path.join(ROOT, "docs", "metrics.md")).splitlines():
        m = re.match(r"\| `(grove_[a-z0-9_]+)` \| (counter|gauge|histogram) \| (.*?) \|", line)
        if m:
            labels = set(re.findall(r"`([a-z_]+)`", m.group(3)))
            metrics[m.group(1)] = {"type": m.group(2), "labels": labels}
    return metrics


PROMQL_WORDS = {
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "group",
    "count_values", "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
    "unless", "bool", "offset", "vector", "scalar", "rate", "irate", "increase", "delta", "idelta",
    "deriv", "histogram_quantile", "avg_over_time", "max_over_time", "min_over_time", "sum_over_time",
    "count_over_time", "last_over_time", "absent", "absent_over_time", "clamp_min", "clamp_max",
    "label_replace", "label_join", "time", "timestamp", "abs", "ceil", "floor", "round", "sort",
    "sort_desc", "changes", "resets", "predict_linear", "humanize", "inf", "nan",
}


def strip_strings(expr):
    """expr without the contents of string literals and label matchers' values."""
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)


def metric_names(expr):
    """Metric names a PromQL expression selects (recording-rule names included)."""
    text = strip_strings(expr)
    text = re.sub(r"\{[^{}]*\}", " ", text)          # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)          # range selectors
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for tok in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        if tok.lower() in PROMQL_WORDS or re.fullmatch(r"\d+(e\d+)?", tok):
            continue
        names.add(tok)
    return names


def grouping_labels(expr):
    labels = set()
    for m in re.finditer(r"\b(?:by|without)\s*\(([^)]*)\)", strip_strings(expr)):
        labels |= {x.strip() for x in m.group(1).split(",") if x.strip()}
    return labels


def matcher_labels(expr):
    labels = set()
    for m in re.finditer(r"\{([^{}]*)\}", expr):
        labels |= set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", m.group(1)))
    return labels


def family(name):
    """Metric family of a sample name (histogram suffixes removed)."""
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def dashboard():
    with open(os.path.join(DEPLOY, "grafana", "grove.json"), encoding="utf-8") as f:
        return json.load(f)


def dashboard_panels(dash):
    for p in dash["panels"]:
        yield p
        for q in p.get("panels", []):
            yield q


def dashboard_targets(dash):
    """(panel title, expr) of every query of every panel."""
    for p in dashboard_panels(dash):
        for t in p.get("targets", []):
            if t.get("expr"):
                yield p["title"], t["expr"]


def rule_groups():
    return yaml_load(os.path.join(DEPLOY, "prometheus", "grove-rules.yaml"))["groups"]


def recording_rules():
    return [r for g in rule_groups() for r in g["rules"] if "record" in r]


def alerting_rules():
    return [r for g in rule_groups() for r in g["rules"] if "alert" in r]


def adapter_queries():
    """(seriesQuery, metricsQuery) of deploy/k8s/prometheus-adapter/values.yaml."""
    values = yaml_load(os.path.join(DEPLOY, "k8s", "prometheus-adapter", "values.yaml"))
    return [(r["seriesQuery"], r["metricsQuery"]) for r in values["rules"]["custom"]]


# Metrics only a CUDA build with a visible GPU exports (docs/metrics.md): queries of these may be
# empty on a CPU-only groved.
GPU_ONLY_MARKERS = ("grove_gpu_memory_", "gpu_memory_utilization", 'device="gpu"')


def gpu_only(expr):
    return any(m in expr for m in GPU_ONLY_MARKERS)


# ---------------------------------------------------------------------------------------------------
# Processes

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is fine
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def wait_for(predicate, timeout, what, proc=None, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited ({proc.returncode}) while waiting for {what}")
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def http_get(url, timeout=5):
    import urllib.request  # noqa: PLC0415
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode("utf-8", "replace")


def http_call(url, body=None, timeout=5):
    """(status, text) of a GET, or of a POST of `body` (an object, sent as JSON); HTTP error
    statuses (503 while draining, ...) are answers, not exceptions; (None, reason) when nothing
    answered."""
    import urllib.error  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as e:
        return None, str(e)


def check_rest(f, ctx, http_port, models):
    """The KServe v2 REST port as a client meets it: live and ready, every model ready, and a JSON
    inference of one all-missing row per model (its output__0 has one row)."""
    base = f"http://127.0.0.1:{http_port}"
    for path in ("/v2/health/live", "/v2/health/ready"):
        code, text = http_call(base + path)
        f.check(code == 200, f"{ctx}: REST GET {path} answered {code} {text[:200]}")
    for model, features in models.items():
        code, text = http_call(f"{base}/v2/models/{model}/ready")
        f.check(code == 200, f"{ctx}: REST model {model} ready answered {code} {text[:200]}")
        body = {"inputs": [{"name": "input__0", "shape": [1, features], "datatype": "FP32",
                            "data": [None] * features}]}
        code, text = http_call(f"{base}/v2/models/{model}/infer", body)
        try:
            outputs = json.loads(text).get("outputs", []) if code == 200 else []
        except ValueError:
            outputs = []
        f.check(code == 200 and [o["name"] for o in outputs] == ["output__0"] and outputs[0]["shape"][0] == 1,
                f"{ctx}: REST infer of model {model} answered {code} {text[:300]}")


def make_model_repository(root):
    """A small model repository built from the golden corpus: regression (XGBoost JSON),
    multiclass (XGBoost UBJSON) and binary (LightGBM text). Returns {model: num_features}."""
    golden = os.path.join(ROOT, "tests", "golden")
    cases = [("regression", "xgb_regression", "model.json"),
             ("multiclass", "xgb_multiclass3", "model.ubj"),
             ("binary", "lgb_binary_nan", "model.txt")]
    models = {}
    for name, case, file in cases:
        os.makedirs(os.path.join(root, name, "1"))
        shutil.copy(os.path.join(golden, case, file), os.path.join(root, name, "1", file))
        with open(os.path.join(golden, case, "meta.json"), encoding="utf-8") as f:
            models[name] = json.load(f)["num_features"]
    return models


class Groved:
    """A groved process (or the entry point running it) with its ports read from --port_file."""

    def __init__(self, argv, env=None, log_path=None):
        self.workdir = tempfile.mkdtemp(prefix="grove-deploy-")
        self.port_file = os.path.join(self.workdir, "ports.json")
        self.log_path = log_path or os.path.join(self.workdir, "groved.log")
        self.log = open(self.log_path, "w")
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=env if env is not None else os.environ.copy())
        self.ports = None

    def wait_ports(self, timeout=120):
        def ready():
            if os.path.exists(self.port_file):
                try:
                    return json.loads(read(self.port_file))
                except ValueError:
                    return None
            return None
        try:
            self.ports = wait_for(ready, timeout, "groved's port file", proc=self.proc)
        except Exception:
            print(self.tail(), flush=True)
            raise
        return self.ports

    def tail(self, n=60):
        self.log.flush()
        try:
            lines = read(self.log_path).splitlines()
        except OSError:
            return ""
        return "---- groved log (last lines) ----\n" + "\n".join(lines[-n:])

    def terminate(self, timeout=60):
        """SIGTERM, wait; returns the exit code (SIGKILL after timeout: returns None)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------
# gRPC health (grpc.health.v1) without generated code: the two messages have one field each.

SERVING_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def _encode_health_request(service):
    data = service.encode()
    if not data:
        return b""
    out = bytearray(b"\x0a")
    n = len(data)
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            break
    return bytes(out) + data


def _decode_health_response(data):
    status = 0
    i = 0
    while i < len(data):
        key = data[i]
        i += 1
        if key == 0x08:  # field 1, varint
            value, shift = 0, 0
            while True:
                b = data[i]
                i += 1
                value |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            status = value
        else:
            break
    return SERVING_STATUS.get(status, str(status))


def health_check(address, service="", timeout=5):
    """grpc.health.v1.Health/Check as Kubernetes' gRPC probe makes it: returns the status name
    ("SERVING", ...) or the gRPC error code name."""
    import grpc  # noqa: PLC0415
    with grpc.insecure_channel(address) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=_encode_health_request,
                                    response_deserializer=_decode_health_response)
        try:
            return check(service, timeout=timeout)
        except grpc.RpcError as e:
            return e.code().name


def wait_health(address, service, want, timeout):
    """Polls Health/Check until it answers `want`; returns the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        last = health_check(address, service, timeout=2)
        if last == want or time.monotonic() >= deadline:
            return last
        time.sleep(0.1)

"""Shared helpers of the Python end-to-end tests (run by CTest, no pytest).

Starts the real groved binary on loopback with ephemeral ports (--port_file), builds a model
repository from the golden corpus (tests/golden, plus /work/shared/testdata cases when present)
and runs the local `grove` CLI for reference answers.

Exit codes: 0 pass, 1 fail, 77 skipped (a tool is genuinely missing). With GROVE_E2E_REQUIRE_TOOLS=1
or CI set in the environment a missing tool is a failure instead.
"""

import argparse
import json
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

SKIP = 77


def require_tools():
    return os.environ.get("GROVE_E2E_REQUIRE_TOOLS", "") not in ("", "0") or bool(
        os.environ.get("CI"))


def skip(why):
    if require_tools():
        print(f"FAIL (tool missing and GROVE_E2E_REQUIRE_TOOLS/CI set): {why}")
        sys.exit(1)
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def parse_args(extra=()):
    """--groved, --grove, --source-dir, and the script's own `extra` options (each default "")."""
    p = argparse.ArgumentParser()
    p.add_argument("--groved", default="")
    p.add_argument("--grove", required=True)
    p.add_argument("--source-dir", required=True)
    for flag in extra:
        p.add_argument(flag, default="")
    a = p.parse_args()
    a.groved = os.environ.get("GROVED_BINARY") or a.groved
    if not a.groved or not os.access(a.groved, os.X_OK):
        skip("groved is not built (no target groved; set GROVED_BINARY)")
    return a


class Failures:
    def __init__(self):
        self.messages = []

    def check(self, cond, message):
        if not cond:
            self.messages.append(message)
            print("  FAIL:", message)
        return cond

    def finish(self, name):
        if self.messages:
            print(f"{name}: {len(self.messages)} failure(s)")
            sys.exit(1)
        print(f"{name}: PASS")
        sys.exit(0)


def f32(x):
    """x rounded to float32 (as the CLI's %.9g text means: it round-trips float32 exactly)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def read_csv(path_or_text, is_text=False):
    """Rows of float32 values (as Python floats) from CSV text or a file."""
    text = path_or_text if is_text else open(path_or_text).read()
    rows = []
    for line in text.splitlines():
        if line.strip():
            rows.append([f32(float(v)) for v in line.split(",")])
    return rows


def float_csv(x_path, out_dir):
    """X.csv rewritten as float32 values in exact decimal text (repr of the float as a double: it
    parses back to exactly that float as a double too): what the wire carries. On the
    original double text the local CLI routes LightGBM rows by the doubles
    (core/model/double_rows.h), which float32 rows cannot express next to a threshold."""
    out = os.path.join(out_dir, os.path.basename(os.path.dirname(x_path)) + "_X32.csv")
    with open(out, "w") as f:
        for row in read_csv(x_path):
            f.write(",".join(repr(v) for v in row) + "\n")
    return out


def corpus_cases(source_dir, shared=True, max_cases=None):
    """(name, case_dir, meta, model_path) of golden cases (and shared ones)."""
    roots = [("g_", os.path.join(source_dir, "tests", "golden"))]
    testdata = os.environ.get("GROVE_TESTDATA") or os.path.join(source_dir, "..", "shared",
                                                                "testdata")
    if shared and os.path.isdir(testdata):
        roots.append(("s_", testdata))
    out = []
    for prefix, root in roots:
        if not os.path.isdir(root):
            continue
        for name in sorted(os.listdir(root)):
            d = os.path.join(root, name)
            meta_path = os.path.join(d, "meta.json")
            if not os.path.isfile(meta_path):
                continue
            meta = json.load(open(meta_path))
            model = None
            for f in ("model.json", "model.txt"):
                if os.path.isfile(os.path.join(d, f)):
                    model = os.path.join(d, f)
                    break
            if model is None or not os.path.isfile(os.path.join(d, "X.csv")):
                continue
            out.append((prefix + name, d, meta, model))
    return out[:max_cases] if max_cases else out


def install_model(repo, name, version, model_file, config=None):
    d = os.path.join(repo, name, str(version))
    os.makedirs(d, exist_ok=True)
    ext = os.path.splitext(model_file)[1]
    shutil.copyfile(model_file, os.path.join(d, "model" + ext))
    if config is not None:
        with open(os.path.join(repo, name, "config.json"), "w") as f:
            json.dump(config, f)


class Groved:
    """A running groved on 127.0.0.1 with ephemeral ports."""

    def __init__(self, groved, repo, flags=(), start_timeout=180):
        self.dir = tempfile.mkdtemp(prefix="grove_e2e_py_")
        port_file = os.path.join(self.dir, "ports.json")
        self.log_path = os.path.join(self.dir, "groved.log")
        self.log = open(self.log_path, "w")
        cmd = [groved, f"--model_repository={repo}", "--grpc_address=127.0.0.1", "--grpc_port=0",
               "--metrics_address=127.0.0.1", "--metrics_port=0", "--http_address=127.0.0.1",
               "--http_port=0", f"--port_file={port_file}"]
        cmd += list(flags)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        end = time.time() + start_timeout
        while True:
            try:
                ports = json.load(open(port_file))
                self.grpc_port = int(ports["grpc_port"])
                self.metrics_port = int(ports["metrics_port"])
                self.http_port = int(ports["http_port"])
                break
            except (OSError, ValueError, KeyError):
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"groved exited with {self.proc.returncode}:\n{self.log_text()}")
            if time.time() > end:
                self.stop()
                raise RuntimeError(f"groved wrote no port file:\n{self.log_text()}")
            time.sleep(0.05)
        self.target = f"127.0.0.1:{self.grpc_port}"

    def log_text(self):
        self.log.flush()
        return open(self.log_path).read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def local_cli(grove, args, model, x_path):
    r = subprocess.run([grove] + list(args) + ["--model", model, "--input", x_path,
                                                "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"grove {' '.join(args)} {model}: {r.stderr}")
    return read_csv(r.stdout, is_text=True)


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def close(a, b, rel=1e-5):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= rel * max(1.0, abs(b))


def compare(failures, what, got_rows, want_rows, exact=True):
    """got_rows / want_rows: lists of lists. Reports the first mismatch."""
    if not failures.check(len(got_rows) == len(want_rows),
                          f"{what}: {len(got_rows)} rows, want {len(want_rows)}"):
        return False
    for r, (g, w) in enumerate(zip(got_rows, want_rows)):
        if not failures.check(len(g) == len(w), f"{what}: row {r} has {len(g)} values, want {len(w)}"):
            return False
        for c, (a, b) in enumerate(zip(g, w)):
            if not (same(a, b) if exact else close(a, b)):
                failures.check(False, f"{what}: row {r} col {c}: got {a!r}, want {b!r}")
                return False
    return True


def triton_status(call):
    """The status tritonclient reports for `call()` ("StatusCode.NOT_FOUND" over gRPC, "404" over
    HTTP), or "OK"."""
    from tritonclient.utils import InferenceServerException
    try:
        call()
    except InferenceServerException as e:
        return e.status()
    return "OK"


PKG_RESOURCES_SHIM = """
import importlib.util, os, sys, types
try:
    import pkg_resources  # noqa: F401
except ImportError:
    _shim = types.ModuleType("pkg_resources")
    _shim.resource_filename = lambda package, name: os.path.join(
        os.path.dirname(importlib.util.find_spec(package).origin), name)
    sys.modules["pkg_resources"] = _shim
"""


def triton_shared_memory():
    """tritonclient.utils.shared_memory, as Triton's examples import it. tritonclient releases
    that import pkg_resources only to locate their libcshm.so fail where setuptools is 81 or
    later (it no longer ships pkg_resources): PKG_RESOURCES_SHIM provides the one function they
    call when it is missing (prepend it to example code run in a fresh interpreter)."""
    exec(PKG_RESOURCES_SHIM, {})
    import tritonclient.utils.shared_memory as shm
    return shm


def wait_ready(check, timeout=120):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        try:
            if check():
                return
        except Exception as e:  # noqa: BLE001 (any transport error: retry)
            last = e
        time.sleep(0.1)
    raise RuntimeError(f"server not ready: {last}")

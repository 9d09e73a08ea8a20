"""(c) groved's KServe v2 REST port through tritonclient[http] and curl, against its gRPC port.

Health, server and model metadata, model readiness and inference (JSON tensors and Triton's binary
tensor extension) must answer what the gRPC port answers for the same request, bit for bit: the
outputs of tritonclient.http equal those of tritonclient.grpc byte for byte, in binary and in JSON
form. curl runs api.md's REST commands. Errors: unknown model (404), strict JSON (a NaN literal,
an unknown field, a duplicate key: 400), a body above --max_message_bytes (413), bearer tokens
(401 without, 200 with). Every call's outcome is counted in grove_requests_total.
"""

import json
import os
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groved_harness as h  # noqa: E402


def post(url, body, headers=None):
    """(status, body bytes) of a POST (urllib raises on >= 400; the body is what we check)."""
    req = urllib.request.Request(url, data=body, method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def curl(args):
    """stdout of curl -s ARGS and the HTTP status (curl -w appends it)."""
    out = subprocess.run(["curl", "-s", "-w", "\n%{http_code}"] + args, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    body, _, code = out.rpartition("\n")
    return body, int(code)


def main():
    args = h.parse_args()
    try:
        import numpy as np
        import tritonclient.grpc as grpcclient
        import tritonclient.http as httpclient
        from tritonclient.utils import InferenceServerException
    except ImportError as e:
        h.skip(f"tritonclient[http] / [grpc] missing: {e}")

    def status_of(call):
        """The HTTP status (a string, as tritonclient reports it) and message of `call`."""
        try:
            call()
        except InferenceServerException as e:
            return e.status(), str(e)
        return "200", ""

    def demo_row():
        inp = httpclient.InferInput("input__0", [1, 8], "FP32")
        inp.set_data_from_numpy(np.zeros((1, 8), dtype=np.float32))
        return inp

    f = h.Failures()
    repo = tempfile.mkdtemp(prefix="grove_repo_rest_")
    cases = h.corpus_cases(args.source_dir, shared=False)
    for name, d, meta, model in cases:
        h.install_model(repo, name, 1, model)
    h.install_model(repo, "demo", 1, os.path.join(args.source_dir, "examples/models/demo/1/model.json"))
    with h.Groved(args.groved, repo, ["--strict_readiness=false", "--repository_poll_seconds=0",
                                      "--max_message_bytes=1048576"]) as server:
        base = f"127.0.0.1:{server.http_port}"
        rest = httpclient.InferenceServerClient(url=base)
        grpc = grpcclient.InferenceServerClient(url=server.target)
        h.wait_ready(lambda: rest.is_server_ready())
        f.check(rest.is_server_live(), "REST is_server_live")
        f.check(rest.get_server_metadata()["name"] == grpc.get_server_metadata().name,
                "server metadata names differ")
        checked = 0
        for name, d, meta, model in cases + [("demo", None, None, None)]:
            if not grpc.is_model_ready(name):
                continue
            f.check(rest.is_model_ready(name), f"{name}: REST says not ready, gRPC ready")
            md_rest = rest.get_model_metadata(name)
            md_grpc = grpc.get_model_metadata(name, as_json=True)
            for key in ("inputs", "outputs"):
                got = [(t["name"], t["datatype"], [int(s) for s in t["shape"]]) for t in md_rest[key]]
                want = [(t["name"], t["datatype"], [int(s) for s in t["shape"]])
                        for t in md_grpc[key]]
                f.check(got == want, f"{name}: metadata {key} {got} != gRPC {want}")
            explainable = any(t["name"] == "treeshap_output" for t in md_rest["outputs"])
            F = md_rest["inputs"][0]["shape"][1]
            x_path = os.path.join(d, "X.csv") if d else os.path.join(args.source_dir,
                                                                        "examples/rows.csv")
            X = np.array(h.read_csv(x_path), dtype=np.float32).reshape(-1, F)
            names = ["output__0"] + (["treeshap_output"] if explainable else [])
            gi = grpcclient.InferInput("input__0", list(X.shape), "FP32")
            gi.set_data_from_numpy(X)
            want = grpc.infer(name, [gi], outputs=[grpcclient.InferRequestedOutput(n) for n in names])
            for binary in (True, False):
                # JSON has no NaN: the JSON form sends the rows without missing values (the
                # binary form carries them), and gRPC is asked the same rows.
                Xs = X if binary else np.nan_to_num(X, nan=0.5)
                ri = httpclient.InferInput("input__0", list(Xs.shape), "FP32")
                ri.set_data_from_numpy(Xs, binary_data=binary)
                got = rest.infer(name, [ri], outputs=[
                    httpclient.InferRequestedOutput(n, binary_data=binary) for n in names])
                ref = want
                if not binary:
                    gi2 = grpcclient.InferInput("input__0", list(Xs.shape), "FP32")
                    gi2.set_data_from_numpy(Xs)
                    ref = grpc.infer(name, [gi2],
                                     outputs=[grpcclient.InferRequestedOutput(n) for n in names])
                for n in names:
                    a = got.as_numpy(n).astype(np.float32)
                    b = ref.as_numpy(n)
                    f.check(a.shape == b.shape and a.tobytes() == b.tobytes(),
                            f"{name} {n} binary={binary}: REST differs from gRPC")
            checked += 1
        f.check(checked >= 5, f"only {checked} models checked")
        print(f"{checked} models: REST equals gRPC")

        # The classification extension and FIL's output options answer the same over both.
        X = np.array(h.read_csv(os.path.join(args.source_dir, "examples/rows.csv")), np.float32)
        gi = grpcclient.InferInput("input__0", list(X.shape), "FP32")
        gi.set_data_from_numpy(X)
        g_top = grpc.infer("demo", [gi], outputs=[
            grpcclient.InferRequestedOutput("output__0", class_count=2)]).as_numpy("output__0")
        g_cls = grpc.infer("demo", [gi], parameters={"predict_proba": False, "threshold": "0.3"})
        for binary in (True, False):
            ri = httpclient.InferInput("input__0", list(X.shape), "FP32")
            ri.set_data_from_numpy(X, binary_data=True)
            top = rest.infer("demo", [ri], outputs=[httpclient.InferRequestedOutput(
                "output__0", class_count=2, binary_data=binary)]).as_numpy("output__0")
            f.check(top.shape == g_top.shape and
                    [v.decode() if isinstance(v, bytes) else v for v in top.ravel()] ==
                    [v.decode() for v in g_top.ravel()],
                    f"class_count binary={binary}: REST {top.ravel()[:4]} gRPC {g_top.ravel()[:4]}")
        cls = rest.infer("demo", [ri], parameters={"predict_proba": False, "threshold": 0.3})
        f.check(cls.as_numpy("output__0").tobytes() == g_cls.as_numpy("output__0").tobytes(),
                "FIL class output with threshold 0.3: REST differs from gRPC")

        # Feature groups: the parameter as a JSON object (REST) or its text (both), the values
        # bit for bit gRPC's, and treeshap_output naming the groups.
        groups = {"ab": ["f0", 1], "tail": [5, 6, 7]}
        g_groups = grpc.infer("demo", [gi], outputs=[
            grpcclient.InferRequestedOutput("treeshap_output")],
            parameters={"groups": json.dumps(groups)}).as_numpy("treeshap_output")
        f.check(g_groups.shape == (X.shape[0], 6), f"grouped values' shape {g_groups.shape}")
        for form in (groups, json.dumps(groups)):
            body = {"inputs": [{"name": "input__0", "shape": list(X.shape), "datatype": "FP32",
                                "data": np.nan_to_num(X, nan=0.5).ravel().tolist()}],
                    "outputs": [{"name": "treeshap_output"}], "parameters": {"groups": form}}
            status, text = post(f"http://{base}/v2/models/demo/infer", json.dumps(body).encode())
            f.check(status == 200, f"groups as {type(form).__name__}: HTTP {status} {text[:200]}")
            if status != 200:
                continue
            out = json.loads(text)["outputs"][0]
            names = [g["name"] for g in json.loads(out["parameters"]["groups"])]
            f.check(names == ["ab", "f2", "f3", "f4", "tail"], f"REST groups named {names}")
            gi_dense = grpcclient.InferInput("input__0", list(X.shape), "FP32")
            gi_dense.set_data_from_numpy(np.nan_to_num(X, nan=0.5))
            ref = grpc.infer("demo", [gi_dense], outputs=[
                grpcclient.InferRequestedOutput("treeshap_output")],
                parameters={"groups": json.dumps(groups)}).as_numpy("treeshap_output")
            f.check(np.array(out["data"], np.float32).tobytes() == ref.ravel().tobytes(),
                    "grouped values: REST differs from gRPC")
        status, text = post(f"http://{base}/v2/models/demo/infer", json.dumps(
            {"inputs": [{"name": "input__0", "shape": [1, 8], "datatype": "FP32",
                         "data": [0.0] * 8}], "outputs": [{"name": "treeshap_output"}],
             "parameters": {"groups": {"a": [0], "b": [0]}}}).encode())
        f.check(status == 400 and b"feature 0" in text, f"overlapping groups: {status} {text}")

        # Errors, through tritonclient.http and plain HTTP.
        code, message = status_of(lambda: rest.infer("no_such_model", [demo_row()]))
        f.check(code == "404" and "not found" in message, f"unknown model: {code} {message}")
        url = f"http://{base}/v2/models/demo/infer"
        row = '{"name":"input__0","shape":[1,8],"datatype":"FP32","data":[%s]}'
        for body, rule in [
            ('{"inputs":[%s]}' % (row % "NaN,0,0,0,0,0,0,0"), "not valid JSON"),
            ('{"inputs":[%s],"bogus":1}' % (row % "0,0,0,0,0,0,0,0"), "unknown field 'bogus'"),
            ('{"inputs":[%s],"inputs":[]}' % (row % "0,0,0,0,0,0,0,0"), "key 'inputs' twice"),
            ('{"inputs":[%s]}' % (row % '0,0,0,"x",0,0,0,0'), "not a number or null"),
        ]:
            status, text = post(url, body.encode())
            f.check(status == 400 and rule in json.loads(text)["error"],
                    f"strict JSON ({rule}): {status} {text!r}")
        # A body above the limit is refused (413 naming the limit) and not parsed.
        status, text = post(url, b" " * ((1 << 20) + 1))
        f.check(status == 413 and "--max_message_bytes" in json.loads(text)["error"],
                f"oversize body: {status} {text[:200]!r}")

        # api.md's curl commands.
        body, code = curl([f"{base}/v2/health/ready"])
        f.check(code == 200, f"curl ready: {code}")
        body, code = curl([f"{base}/v2/models/demo"])
        f.check(code == 200 and json.loads(body)["inputs"][0]["parameters"]["feature_names"]
                == json.dumps([f"f{i}" for i in range(8)], separators=(",", ":")),
                f"curl metadata: {code} {body}")
        body, code = curl(["-X", "POST", f"{base}/v2/models/demo/infer", "-H",
                           "Content-Type: application/json", "-d",
                           '{"inputs":[{"name":"input__0","shape":[1,8],"datatype":"FP32",'
                           '"data":[[0.5,null,2,0,0,0,0,0]]}],"outputs":[{"name":"output__0"}]}'])
        out = json.loads(body) if code == 200 else {}
        xr = np.array([[0.5, np.nan, 2, 0, 0, 0, 0, 0]], dtype=np.float32)
        gi = grpcclient.InferInput("input__0", [1, 8], "FP32")
        gi.set_data_from_numpy(xr)
        ref = grpc.infer("demo", [gi]).as_numpy("output__0").ravel().tolist()
        f.check(code == 200 and np.array(out["outputs"][0]["data"], np.float32).tobytes()
                == np.array(ref, np.float32).tobytes(), f"curl infer: {code} {body} vs {ref}")

        # The one NOT_FOUND inference was the REST call for an unknown model.
        metrics = urllib.request.urlopen(
            f"http://127.0.0.1:{server.metrics_port}/metrics").read().decode()
        line = [m for m in metrics.splitlines() if m.startswith("grove_requests_total{")
                and 'code="NOT_FOUND"' in m and 'method="ModelInfer"' in m]
        f.check(len(line) == 1 and line[0].endswith(" 1"),
                f"REST calls in grove_requests_total: {line}")
        rest.close()
        grpc.close()

    # Access control: the same bearer tokens as gRPC; readiness stays open.
    token = "rest-e2e-infer-0123456789abcdef"
    token_file = os.path.join(tempfile.mkdtemp(prefix="grove_tokens_"), "tokens")
    with open(token_file, "w") as fh:
        fh.write(f"infer {token}\n")
    with h.Groved(args.groved, repo, ["--strict_readiness=false", "--repository_poll_seconds=0",
                                      f"--auth_token_file={token_file}"]) as server:
        base = f"127.0.0.1:{server.http_port}"
        rest = httpclient.InferenceServerClient(url=base)
        h.wait_ready(lambda: rest.is_server_ready())
        f.check(rest.is_model_ready("demo"), "readiness needs no token")
        code, message = status_of(lambda: rest.infer("demo", [demo_row()]))
        f.check(code == "401", f"infer without a token: {code} {message}")
        res = rest.infer("demo", [demo_row()], headers={"Authorization": f"Bearer {token}"})
        f.check(res.as_numpy("output__0").shape == (1, 2), "infer with the token")
        rest.close()
    f.finish("e2e_rest")


if __name__ == "__main__":
    sys.exit(main())

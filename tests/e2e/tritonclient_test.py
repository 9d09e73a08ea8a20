"""(c) groved through tritonclient[grpc], unchanged, as a Triton + FIL client would call it.

ServerLive / ServerReady / ModelReady / ServerMetadata / ModelMetadata, and ModelInfer with input__0
(FP32 [rows, F]; raw and typed contents) asking for output__0 and treeshap_output, Triton's
classification extension (class_count) and FIL's output options (predict_proba, output_class,
threshold) as request parameters. Answers are
compared with the local `grove` CLI: output__0 is FIL's predict_proba layout ([rows, 2] = [1-p, p]
for binary classifiers, class probabilities for softmax, otherwise the transformed prediction),
treeshap_output is [rows, F+1] (one output) or [rows, K, F+1], bias last. Then a groved with
--auth_token_file: calls need the token that tritonclient sends with headers=.
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groved_harness as h  # noqa: E402


def main():
    args = h.parse_args()
    try:
        import numpy as np
        import grpc
        import tritonclient.grpc as grpcclient
        from tritonclient.grpc import service_pb2, service_pb2_grpc
        from tritonclient.utils import InferenceServerException
    except ImportError as e:
        h.skip(f"tritonclient[grpc] missing: {e}")

    status_of = h.triton_status

    f = h.Failures()
    repo = tempfile.mkdtemp(prefix="grove_repo_triton_")
    xdir = tempfile.mkdtemp(prefix="grove_x32_")
    cases = h.corpus_cases(args.source_dir)
    for name, d, meta, model in cases:
        h.install_model(repo, name, 1, model)
    with h.Groved(args.groved, repo, ["--strict_readiness=false",
                                      "--repository_poll_seconds=0"]) as server:
        client = grpcclient.InferenceServerClient(url=server.target)
        triton_channel = grpc.insecure_channel(server.target, options=[
            ("grpc.max_receive_message_length", 1 << 30)])
        triton_stub = service_pb2_grpc.GRPCInferenceServiceStub(triton_channel)
        h.wait_ready(lambda: client.is_server_ready())
        f.check(client.is_server_live(), "is_server_live")
        sm = client.get_server_metadata()
        f.check(bool(sm.name), f"server metadata {sm}")
        checked = 0
        for name, d, meta, model in cases:
            if not client.is_model_ready(name):
                continue
            x_path = h.float_csv(os.path.join(d, "X.csv"), xdir)
            X = np.array(h.read_csv(x_path), dtype=np.float32)
            md = client.get_model_metadata(name)
            ins = {t.name: t for t in md.inputs}
            outs = {t.name: t for t in md.outputs}
            f.check("input__0" in ins and ins["input__0"].datatype == "FP32",
                    f"{name}: metadata inputs {md.inputs}")
            f.check(list(ins["input__0"].shape)[-1] == X.shape[1] if "input__0" in ins else False,
                    f"{name}: input__0 shape {ins.get('input__0')}")
            f.check("output__0" in outs, f"{name}: metadata outputs {md.outputs}")

            pred = np.array(h.local_cli(args.grove, ["predict"], model, x_path), dtype=np.float32)
            margin = np.array(h.local_cli(args.grove, ["predict", "--kind", "margin"], model,
                                          x_path), dtype=np.float32)
            explainable = "treeshap_output" in outs
            for raw in (True, False):
                wanted = [grpcclient.InferRequestedOutput("output__0")]
                if explainable:
                    wanted.append(grpcclient.InferRequestedOutput("treeshap_output"))
                if raw:
                    # tritonclient sends raw_input_contents.
                    inp = grpcclient.InferInput("input__0", list(X.shape), "FP32")
                    inp.set_data_from_numpy(X)
                    res = client.infer(name, [inp], outputs=wanted)
                else:
                    # Typed contents (fp32_contents) through Triton's own generated stubs.
                    req = service_pb2.ModelInferRequest(model_name=name)
                    t = req.inputs.add(name="input__0", datatype="FP32", shape=list(X.shape))
                    t.contents.fp32_contents.extend(X.ravel().tolist())
                    for w in wanted:
                        req.outputs.add(name=w._output.name)
                    res = grpcclient.InferResult(triton_stub.ModelInfer(req, timeout=120))
                out0 = res.as_numpy("output__0")
                if not f.check(out0 is not None and out0.shape[0] == X.shape[0],
                               f"{name}: output__0 shape {None if out0 is None else out0.shape}"):
                    continue
                # Binary classifiers: [1-p, p] (FIL predict_proba); otherwise the prediction.
                if out0.shape[1] == 2 and pred.shape[1] == 1:
                    h.compare(f, f"{name} output__0[:,1] raw={raw}", out0[:, 1:].tolist(),
                              pred.tolist(), exact=True)
                    h.compare(f, f"{name} output__0[:,0] raw={raw}", out0[:, :1].tolist(),
                              (1.0 - pred.astype(np.float64)).astype(np.float32).tolist(),
                              exact=False)
                elif out0.shape[1] == pred.shape[1]:
                    h.compare(f, f"{name} output__0 raw={raw}", out0.tolist(), pred.tolist())
                else:
                    # multi:softmax predicts a class index; FIL's output__0 has probabilities.
                    m = margin.astype(np.float64)
                    e = np.exp(m - m.max(axis=1, keepdims=True))
                    h.compare(f, f"{name} output__0 (softmax) raw={raw}", out0.tolist(),
                              (e / e.sum(axis=1, keepdims=True)).tolist(), exact=False)
                if explainable:
                    shap = res.as_numpy("treeshap_output")
                    want = np.array(h.local_cli(args.grove, ["explain"], model, x_path),
                                    dtype=np.float32)
                    k = margin.shape[1]
                    F = X.shape[1]
                    if k == 1:
                        f.check(shap.shape == (X.shape[0], F + 1), f"{name}: shap {shap.shape}")
                    else:
                        f.check(shap.shape == (X.shape[0], k, F + 1), f"{name}: shap {shap.shape}")
                    h.compare(f, f"{name} treeshap_output raw={raw}",
                              shap.reshape(X.shape[0], -1).tolist(), want.tolist())
            checked += 1
        f.check(checked >= 5, f"only {checked} models checked")

        # Errors: unknown model, wrong shape, wrong datatype.
        name, d, meta, model = cases[0]
        X = np.array(h.read_csv(os.path.join(d, "X.csv")), dtype=np.float32)
        inp = grpcclient.InferInput("input__0", list(X.shape), "FP32")
        inp.set_data_from_numpy(X)
        st = status_of(lambda: client.infer("no_such_model", [inp]))
        f.check("NOT_FOUND" in str(st), f"unknown model: {st}")
        bad = np.zeros((2, X.shape[1] + 3), dtype=np.float32)
        inp2 = grpcclient.InferInput("input__0", list(bad.shape), "FP32")
        inp2.set_data_from_numpy(bad)
        st = status_of(lambda: client.infer(name, [inp2]))
        f.check("INVALID_ARGUMENT" in str(st), f"wrong feature count: {st}")
        xi = np.zeros(X.shape, dtype=np.int32)
        inp3 = grpcclient.InferInput("input__0", list(xi.shape), "INT32")
        inp3.set_data_from_numpy(xi)
        st = status_of(lambda: client.infer(name, [inp3]))
        f.check("INVALID_ARGUMENT" in str(st), f"INT32 input: {st}")
        # FP64 input (pandas float64) is converted as the model's library routes the doubles: the
        # answers equal the local CLI's on the double text of X.csv, LightGBM models included.
        for name, d, meta, model in cases:
            x_csv = os.path.join(d, "X.csv")
            x64 = np.array([[float(v) for v in line.split(",")]
                            for line in open(x_csv).read().splitlines() if line.strip()],
                           dtype=np.float64)
            inp4 = grpcclient.InferInput("input__0", list(x64.shape), "FP64")
            inp4.set_data_from_numpy(x64)
            try:
                res = client.infer(name, [inp4])
            except InferenceServerException as e:
                f.check(False, f"{name} FP64: {e}")
                continue
            out0 = res.as_numpy("output__0")
            pred = np.array(h.local_cli(args.grove, ["predict"], model, x_csv), dtype=np.float32)
            if out0.shape[1] == 2 and pred.shape[1] == 1:
                out0 = out0[:, 1:]
            if out0.shape == pred.shape:
                h.compare(f, f"{name} FP64 output__0", out0.tolist(), pred.tolist())
        # Triton's classification extension (class_count): the top classes of output__0 as
        # "value:index" strings, and FIL's output options as request parameters.
        for name0, d0, _, _ in cases:
            if not client.is_model_ready(name0):
                continue
            x0 = np.array(h.read_csv(h.float_csv(os.path.join(d0, "X.csv"), xdir)), dtype=np.float32)
            inp5 = grpcclient.InferInput("input__0", list(x0.shape), "FP32")
            inp5.set_data_from_numpy(x0)
            plain = client.infer(name0, [inp5]).as_numpy("output__0")
            top = client.infer(name0, [inp5], outputs=[
                grpcclient.InferRequestedOutput("output__0", class_count=2)]).as_numpy("output__0")
            k = min(2, plain.shape[1])
            f.check(top.shape == (x0.shape[0], k), f"{name0} class_count shape {top.shape}")
            for r in range(x0.shape[0]):
                value, index = top[r][0].decode().split(":")
                best = int(np.argmax(plain[r]))
                f.check(int(index) == best and abs(float(value) - plain[r][best]) < 1e-6,
                        f"{name0} row {r}: top class {top[r][0]} vs output__0 {plain[r]}")
            if plain.shape[1] == 2:  # a binary classifier: FIL's class output with a threshold
                # tritonclient.grpc sends no float parameters: the threshold goes as a string.
                cls = client.infer(name0, [inp5], parameters={"predict_proba": False,
                                                              "threshold": "0.3"})
                got = cls.as_numpy("output__0")
                f.check(got.shape == (x0.shape[0], 1) and
                        (got[:, 0] == (plain[:, 1] > np.float32(0.3))).all(),
                        f"{name0} output_class with threshold 0.3: {got.ravel()[:5]}")
                code = status_of(lambda: client.infer(name0, [inp5], parameters={"threshold": "2"}))
                f.check("INVALID_ARGUMENT" in str(code), f"threshold 2: {code}")
        try:
            unknown_ready = client.is_model_ready("no_such_model")
        except InferenceServerException:
            unknown_ready = False
        f.check(not unknown_ready, "unknown model reported ready")
        client.close()
        triton_channel.close()

    # Access control (docs/operations.md "Authentication"): tritonclient sends the bearer token
    # with headers=; readiness needs none.
    token = "triton-e2e-infer-0123456789abcdef"
    token_file = os.path.join(tempfile.mkdtemp(prefix="grove_tokens_"), "tokens")
    with open(token_file, "w") as fh:
        fh.write(f"# ROLE TOKEN\ninfer {token}\n")
    with h.Groved(args.groved, repo, ["--strict_readiness=false", "--repository_poll_seconds=0",
                                      f"--auth_token_file={token_file}"]) as server:
        client = grpcclient.InferenceServerClient(url=server.target)
        h.wait_ready(lambda: client.is_server_ready())
        headers = {"authorization": f"Bearer {token}"}
        ready = [c for c in cases if client.is_model_ready(c[0])]
        if f.check(ready, "no model ready behind access control"):
            name, d, meta, model = ready[0]
            X = np.array(h.read_csv(os.path.join(d, "X.csv")), dtype=np.float32)
            inp = grpcclient.InferInput("input__0", list(X.shape), "FP32")
            inp.set_data_from_numpy(X)
            st = status_of(lambda: client.infer(name, [inp]))
            f.check("UNAUTHENTICATED" in str(st), f"infer without a token: {st}")
            st = status_of(lambda: client.get_model_metadata(name))
            f.check("UNAUTHENTICATED" in str(st), f"metadata without a token: {st}")
            st = status_of(lambda: client.infer(name, [inp], headers={
                "authorization": "Bearer wrong-token-0123456789abcdef"}))
            f.check("UNAUTHENTICATED" in str(st), f"infer with a wrong token: {st}")
            res = client.infer(name, [inp], headers=headers)
            out0 = res.as_numpy("output__0")
            f.check(out0 is not None and out0.shape[0] == X.shape[0],
                    f"infer with the token: {None if out0 is None else out0.shape}")
            f.check(client.get_model_metadata(name, headers=headers).name == name,
                    "metadata with the token")
        client.close()
        log = server.log_text()
        f.check(token not in log, "the token appears in groved's log")
    f.finish("e2e_tritonclient")


if __name__ == "__main__":
    sys.exit(main())

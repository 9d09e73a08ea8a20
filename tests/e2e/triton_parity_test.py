"""(c) Triton's model configuration, statistics and repository APIs through tritonclient, over gRPC
and REST, against groved with --model_control and bearer tokens (role infer and admin).

  * get_model_config: a configuration synthesised from the model (max_batch_size, input__0 and the
    outputs with their dims), the same over both protocols;
  * get_inference_statistics: success counts grow by the inferences made, over either protocol;
  * get_model_repository_index: every model READY; after an unload UNAVAILABLE with its reason;
  * unload_model / load_model: role admin (PERMISSION_DENIED / 403 with an infer token), and a
    load with a config override is refused (UNIMPLEMENTED / 501) naming the parameter.
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
        import tritonclient.grpc as grpcclient
        import tritonclient.http as httpclient
        from tritonclient.utils import InferenceServerException
    except ImportError as e:
        h.skip(f"tritonclient[grpc,http] missing: {e}")

    def error_of(call):
        try:
            call()
        except InferenceServerException as e:
            return f"{e.status()} {e}"
        return "OK"

    f = h.Failures()
    repo = tempfile.mkdtemp(prefix="grove_repo_parity_")
    h.install_model(repo, "demo", 1, os.path.join(args.source_dir,
                                                  "examples/models/demo/1/model.json"))
    for name, d, meta, model in h.corpus_cases(args.source_dir, shared=False)[:3]:
        h.install_model(repo, name, 1, model)
    infer_token, admin_token = "parity-infer-0123456789abcdef", "parity-admin-0123456789abcdef"
    token_file = os.path.join(tempfile.mkdtemp(prefix="grove_tokens_"), "tokens")
    with open(token_file, "w") as fh:
        fh.write(f"infer {infer_token}\nadmin {admin_token}\n")
    with h.Groved(args.groved, repo, ["--strict_readiness=false", "--repository_poll_seconds=0",
                                      "--model_control", f"--auth_token_file={token_file}"]) as server:
        # Copied for every call: tritonclient.http adds its own headers to the dict it is given.
        infer = {"authorization": f"Bearer {infer_token}"}
        admin = {"authorization": f"Bearer {admin_token}"}
        g = grpcclient.InferenceServerClient(url=server.target)
        r = httpclient.InferenceServerClient(url=f"127.0.0.1:{server.http_port}")
        h.wait_ready(lambda: r.is_server_ready())

        # Configuration.
        gc = g.get_model_config("demo", headers=dict(infer), as_json=True)["config"]
        rc = r.get_model_config("demo", headers=dict(infer))
        f.check(rc["max_batch_size"] > 0 and int(gc["max_batch_size"]) == rc["max_batch_size"],
                f"max_batch_size gRPC {gc.get('max_batch_size')} REST {rc.get('max_batch_size')}")
        f.check(rc["input"] == [{"name": "input__0", "data_type": "TYPE_FP32", "dims": [8]}],
                f"config input {rc['input']}")
        f.check([(o["name"], o["dims"]) for o in rc["output"]] ==
                [("output__0", [2]), ("treeshap_output", [9])], f"config output {rc['output']}")
        f.check([(o["name"], [int(x) for x in o["dims"]]) for o in gc["output"]] ==
                [(o["name"], o["dims"]) for o in rc["output"]], "config outputs differ")
        f.check("UNAUTHENTICATED" in error_of(lambda: g.get_model_config("demo")),
                "config without a token")

        # Statistics: three inferences over gRPC, two over REST.
        before = r.get_inference_statistics("demo", headers=dict(infer))["model_stats"][0]
        X = np.array(h.read_csv(os.path.join(args.source_dir, "examples/rows.csv")), np.float32)
        for _ in range(3):
            gi = grpcclient.InferInput("input__0", list(X.shape), "FP32")
            gi.set_data_from_numpy(X)
            g.infer("demo", [gi], headers=dict(infer))
        for _ in range(2):
            ri = httpclient.InferInput("input__0", list(X.shape), "FP32")
            ri.set_data_from_numpy(X)
            r.infer("demo", [ri], headers=dict(infer))
        after = g.get_inference_statistics("demo", headers=dict(infer), as_json=True)["model_stats"][0]
        grew = int(after["inference_stats"]["success"]["count"]) - \
            before["inference_stats"]["success"]["count"]
        f.check(grew == 5, f"success count grew by {grew}, not 5")
        f.check(int(after["inference_count"]) - before["inference_count"] == 5 * X.shape[0],
                f"inference_count {before['inference_count']} -> {after['inference_count']}")
        f.check(int(after["inference_stats"]["success"]["ns"]) > 0, f"success ns {after}")
        every = r.get_inference_statistics(headers=dict(infer))["model_stats"]
        f.check(len(every) >= 2 and "demo" in [m["name"] for m in every], f"all stats {every}")

        # Repository index and control.
        index = r.get_model_repository_index(headers=dict(infer))
        f.check(all(m["state"] == "READY" for m in index) and len(index) >= 2, f"index {index}")
        denied = error_of(lambda: g.unload_model("demo", headers=dict(infer)))
        f.check("PERMISSION_DENIED" in denied, f"unload with role infer: {denied}")
        denied = error_of(lambda: r.unload_model("demo", headers=dict(infer)))
        f.check(denied.startswith("403"), f"REST unload with role infer: {denied}")
        r.unload_model("demo", headers=dict(admin))
        gone = [m for m in g.get_model_repository_index(headers=dict(infer), as_json=True)["models"]
                if m["name"] == "demo"]
        f.check(gone and gone[0]["state"] == "UNAVAILABLE" and gone[0].get("reason"),
                f"after unload: {gone}")
        f.check(not r.is_model_ready("demo"), "demo ready after unload")
        listed = r.get_model_repository_index(headers=dict(infer))  # unloaded versions included
        f.check(any(m["name"] == "demo" for m in listed), "index lost the unloaded model")
        g.load_model("demo", headers=dict(admin))
        f.check(g.is_model_ready("demo"), "demo not ready after load")
        refused = error_of(lambda: r.load_model("demo", headers=dict(admin), config="{}"))
        f.check(refused.startswith("501") and "'config'" in refused, f"load with config: {refused}")
        refused = error_of(lambda: g.load_model("demo", headers=dict(admin), config="{}"))
        f.check("UNIMPLEMENTED" in refused and "'config'" in refused, f"gRPC config: {refused}")
        g.close()
        r.close()
    f.finish("e2e_triton_parity")


if __name__ == "__main__":
    sys.exit(main())

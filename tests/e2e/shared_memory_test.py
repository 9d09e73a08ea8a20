"""(g) System shared memory against the real groved (--shared_memory), as Triton clients use it.

tritonclient[grpc] and [http] run Triton's shared memory example flow unchanged
(tritonclient.utils.shared_memory creates the POSIX objects; register_system_shared_memory,
get_system_shared_memory_status, InferInput.set_shared_memory,
InferRequestedOutput.set_shared_memory, unregister_system_shared_memory): the outputs read back
from the regions are bit-identical to the same inference sent inline, for a binary classifier
(output__0 as [1-p, p]) and a multiclass model, with treeshap_output at an offset. CUDA shared
memory answers UNIMPLEMENTED; with a token file registering needs the admin token. Then the C++
client through the CLI: `grove predict --server --shared-memory` writes the bytes the inline
remote call writes, and `grove bench --shared-memory` runs, registers and cleans up.
"""

import glob
import json
import os
import subprocess
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
        shm = h.triton_shared_memory()
    except ImportError as e:
        h.skip(f"tritonclient[grpc,http] with its shared memory helpers missing: {e}")

    f = h.Failures()
    repo = tempfile.mkdtemp(prefix="grove_repo_shm_")
    src = args.source_dir
    h.install_model(repo, "demo", 1, os.path.join(src, "examples", "models", "demo", "1",
                                                  "model.json"))
    multi_dir = os.path.join(src, "tests", "golden", "xgb_multiclass3")
    h.install_model(repo, "multi", 1, os.path.join(multi_dir, "model.json"))
    x_demo = np.array(h.read_csv(os.path.join(src, "examples", "rows.csv")), dtype=np.float32)
    xdir = tempfile.mkdtemp(prefix="grove_x32_")
    x_multi = np.array(h.read_csv(h.float_csv(os.path.join(multi_dir, "X.csv"), xdir)),
                       dtype=np.float32)
    tag = str(os.getpid())

    status_of = h.triton_status

    def example_flow(module, client, model, X, protocol):
        """Triton's simple_*_shm_client flow for `model`; returns the outputs read from shared
        memory and those of the same request sent inline."""
        client.unregister_system_shared_memory()
        in_bytes = X.size * X.itemsize
        inline = client.infer(model, [inline_input(module, X)],
                              outputs=[module.InferRequestedOutput("output__0"),
                                       module.InferRequestedOutput("treeshap_output")])
        want = {n: inline.as_numpy(n) for n in ("output__0", "treeshap_output")}
        out_bytes = {n: want[n].size * 4 for n in want}
        shap_offset = 256  # treeshap_output after output__0, at an offset of the output region
        out_size = shap_offset + out_bytes["output__0"] + out_bytes["treeshap_output"]
        in_key, out_key = f"/grove_in_{protocol}_{tag}", f"/grove_out_{protocol}_{tag}"
        in_handle = shm.create_shared_memory_region("input_data", in_key, in_bytes)
        out_handle = shm.create_shared_memory_region("output_data", out_key, out_size)
        try:
            shm.set_shared_memory_region(in_handle, [X])
            client.register_system_shared_memory("input_data", in_key, in_bytes)
            client.register_system_shared_memory("output_data", out_key, out_size)
            status = client.get_system_shared_memory_status()
            if protocol == "grpc":
                names = sorted(status.regions.keys())
                keys = sorted(r.key for r in status.regions.values())
            else:
                names = sorted(r["name"] for r in status)
                keys = sorted(r["key"] for r in status)
            f.check(names == ["input_data", "output_data"], f"{protocol}: status names {names}")
            f.check(keys == sorted([in_key, out_key]), f"{protocol}: status keys {keys}")
            inp = module.InferInput("input__0", list(X.shape), "FP32")
            inp.set_shared_memory("input_data", in_bytes)
            o0 = module.InferRequestedOutput("output__0")
            o0.set_shared_memory("output_data", out_bytes["output__0"])
            o1 = module.InferRequestedOutput("treeshap_output")
            o1.set_shared_memory("output_data", out_bytes["treeshap_output"],
                                 offset=shap_offset + out_bytes["output__0"])
            result = client.infer(model, [inp], outputs=[o0, o1])
            got = {}
            for name, offset in (("output__0", 0),
                                 ("treeshap_output", shap_offset + out_bytes["output__0"])):
                meta = result.get_output(name)
                shape = list(meta.shape) if protocol == "grpc" else meta["shape"]
                f.check(shape == list(want[name].shape),
                        f"{protocol} {model} {name}: shape {shape}, want {list(want[name].shape)}")
                # A view of the mapping: copied before the region is destroyed.
                got[name] = shm.get_contents_as_numpy(out_handle, np.float32, shape,
                                                      offset=offset).copy()
            client.unregister_system_shared_memory("input_data")
            client.unregister_system_shared_memory()
            status = client.get_system_shared_memory_status()
            left = len(status.regions) if protocol == "grpc" else len(status)
            f.check(left == 0, f"{protocol}: {left} regions left after unregistering")
            return got, want
        finally:
            shm.destroy_shared_memory_region(in_handle)
            shm.destroy_shared_memory_region(out_handle)

    def inline_input(module, X):
        inp = module.InferInput("input__0", list(X.shape), "FP32")
        inp.set_data_from_numpy(X)
        return inp

    with h.Groved(args.groved, repo, ["--strict_readiness=false", "--repository_poll_seconds=0",
                                      "--shared_memory"]) as server:
        grpc_client = grpcclient.InferenceServerClient(url=server.target)
        http_client = httpclient.InferenceServerClient(url=f"127.0.0.1:{server.http_port}")
        h.wait_ready(lambda: grpc_client.is_server_ready())
        f.check("system_shared_memory" in grpc_client.get_server_metadata().extensions,
                "ServerMetadata lacks system_shared_memory")
        for protocol, module, client in (("grpc", grpcclient, grpc_client),
                                         ("http", httpclient, http_client)):
            for model, X in (("demo", x_demo), ("multi", x_multi)):
                got, want = example_flow(module, client, model, X, protocol)
                for name in want:
                    f.check(got[name].tobytes() == want[name].tobytes(),
                            f"{protocol} {model} {name}: shared memory output differs from the "
                            f"inline one")
            f.check(status_of(lambda: client.get_cuda_shared_memory_status()) in
                    ("StatusCode.UNIMPLEMENTED", "501", 501, "UNIMPLEMENTED"),
                    f"{protocol}: CUDA shared memory status: "
                    f"{status_of(lambda: client.get_cuda_shared_memory_status())}")

        # The C++ client through the CLI: the same bytes as the inline remote call.
        def cli_objects():
            return set(glob.glob("/dev/shm/grove-bench-*") + glob.glob("/dev/shm/grove-predict-*"))

        objects_before = cli_objects()  # other runs on this host may have theirs
        x_path = os.path.join(src, "examples", "rows.csv")
        base = [args.grove, "predict", "--server", server.target, "--model", "demo", "--input",
                x_path, "--no-progress"]
        inline = subprocess.run(base, capture_output=True, text=True, timeout=120)
        shared = subprocess.run(base + ["--shared-memory"], capture_output=True, text=True,
                                timeout=120)
        f.check(inline.returncode == 0 and shared.returncode == 0,
                f"grove predict: {inline.stderr} / {shared.stderr}")
        f.check(shared.stdout == inline.stdout and inline.stdout,
                "grove predict --shared-memory differs from the inline remote predict")
        bench = subprocess.run([args.grove, "bench", "--server", server.target, "--model", "demo",
                                "--input", x_path, "--rows-per-request", "16", "--concurrency",
                                "2", "--requests", "50", "--warmup", "0", "--shared-memory",
                                "--json"], capture_output=True, text=True, timeout=120)
        f.check(bench.returncode == 0, f"grove bench --shared-memory: {bench.stderr}")
        if bench.returncode == 0:
            report = json.loads(bench.stdout)
            f.check(report["shared_memory"] is True and report["requests_ok"] > 0,
                    f"bench report {report}")
        f.check(len(grpc_client.get_system_shared_memory_status().regions) == 0,
                "the CLI left regions registered")
        f.check(not cli_objects() - objects_before,
                f"the CLI left shared memory objects: {sorted(cli_objects() - objects_before)}")

    # Access control: registering is a control operation (role admin).
    tokens = os.path.join(repo, "..", f"grove_shm_tokens_{tag}")
    with open(tokens, "w") as t:
        t.write("infer infer-token-0123456789abcdef\nadmin admin-token-0123456789abcdef\n")
    try:
        with h.Groved(args.groved, repo, ["--repository_poll_seconds=0", "--shared_memory",
                                          f"--auth_token_file={tokens}"]) as server:
            client = grpcclient.InferenceServerClient(url=server.target)
            infer = {"authorization": "Bearer infer-token-0123456789abcdef"}
            admin = {"authorization": "Bearer admin-token-0123456789abcdef"}
            h.wait_ready(lambda: client.is_server_ready())
            key = f"/grove_auth_{tag}"
            handle = shm.create_shared_memory_region("r", key, 64)
            try:
                s = status_of(lambda: client.register_system_shared_memory("r", key, 64,
                                                                           headers=infer))
                f.check(s == "StatusCode.PERMISSION_DENIED", f"register with infer token: {s}")
                s = status_of(lambda: client.register_system_shared_memory("r", key, 64,
                                                                           headers=admin))
                f.check(s == "OK", f"register with admin token: {s}")
                # A region belongs to the credential that registered it: the admin sees it,
                # another caller does not.
                status = client.get_system_shared_memory_status(headers=admin)
                f.check(list(status.regions.keys()) == ["r"], f"status {status}")
                status = client.get_system_shared_memory_status(headers=infer)
                f.check(len(status.regions) == 0, f"another caller's status {status}")
                s = status_of(lambda: client.unregister_system_shared_memory(headers=infer))
                f.check(s == "StatusCode.PERMISSION_DENIED", f"unregister with infer token: {s}")
                client.unregister_system_shared_memory(headers=admin)
            finally:
                shm.destroy_shared_memory_region(handle)
    finally:
        os.remove(tokens)
    f.finish("e2e_shared_memory")


if __name__ == "__main__":
    main()

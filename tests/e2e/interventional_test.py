"""Interventional SHAP served by groved against the local `grove` CLI, bit for bit.

Every corpus case gets a background beside its version directory (rows 40..64 of its X.csv;
background.csv for half of the cases, background.npy -- numpy.save of the same doubles -- for the
other half) and is explained on its first 40 rows in every output space:

  * `grove explain --server ... --method interventional [--output-space S]` (grove.v1
    ExplainStream) must print exactly what `grove explain --background FILE [--output-space S]`
    prints locally, or fail the same way where the local CLI refuses (linear trees, multi:softmax
    probabilities, pairs differing in too many features);
  * tritonclient[grpc] with request parameters method / output_space and FP64 rows must return
    the local CLI's values as float32, bit for bit;
  * `grove inspect --server` reports background_rows; a model without a background answers
    FAILED_PRECONDITION naming the file to add.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groved_harness as h  # noqa: E402

ROWS = 40
BACKGROUND = range(40, 65)
SPACES = ("margin", "probability", "probability_linearized")


def grove(binary, args):
    progress = [] if args[0] == "inspect" else ["--no-progress"]
    return subprocess.run([binary] + args + progress, capture_output=True, text=True, timeout=600)


def lines(path, keep):
    with open(path) as f:
        rows = [line for line in f.read().splitlines() if line.strip()]
    return [rows[i] for i in keep if i < len(rows)]


def write_background(np, case_dir, model_dir, npy):
    """background.csv or background.npy in model_dir; returns its path (None: X.csv too short)."""
    rows = lines(os.path.join(case_dir, "X.csv"), BACKGROUND)
    if not rows:
        return None
    if not npy:
        path = os.path.join(model_dir, "background.csv")
        with open(path, "w") as f:
            f.write("\n".join(rows) + "\n")
        return path
    # The doubles the CSV text holds (empty or nan: missing), as from_chars reads them.
    values = [[float(v) if v.strip() and v.strip().lower() != "nan" else float("nan")
               for v in row.split(",")] for row in rows]
    path = os.path.join(model_dir, "background.npy")
    np.save(path, np.array(values, dtype="<f8"))
    return path


def check_case(f, args, np, grpcclient, client, server, name, x_path, bg_path, model, compared):
    """Appends (name, space) to `compared` for every space both answered."""
    for space in SPACES:
        flags = [] if space == "margin" else ["--output-space", space]
        local = grove(args.grove, ["explain", "--model", model, "--input", x_path,
                                   "--background", bg_path] + flags)
        remote = grove(args.grove, ["explain", "--server", server.target, "--model", name,
                                    "--input", x_path, "--method", "interventional"] + flags)
        if local.returncode != 0:
            f.check(remote.returncode != 0,
                    f"{name} {space}: local refused ({local.stderr.strip()}) but groved answered")
            continue
        if not f.check(remote.returncode == 0, f"{name} {space}: groved failed: {remote.stderr}"):
            continue
        f.check(remote.stdout == local.stdout,
                f"{name} {space}: grove explain --server differs from the local CLI")
        # Interaction values and residual columns (margin): the same bytes from groved.
        for extra in (["--residuals"], ["--interactions"], ["--interactions", "--residuals"]):
            if space != "margin":
                break
            local_x = grove(args.grove, ["explain", "--model", model, "--input", x_path,
                                         "--background", bg_path] + extra)
            remote_x = grove(args.grove, ["explain", "--server", server.target, "--model", name,
                                          "--input", x_path, "--method", "interventional"] + extra)
            if local_x.returncode != 0:  # interactions of a model too wide for a response
                f.check(remote_x.returncode != 0, f"{name} {extra}: local refused, groved answered")
                continue
            f.check(remote_x.returncode == 0 and remote_x.stdout == local_x.stdout,
                    f"{name} {extra}: grove explain --server differs from the local CLI: "
                    f"{remote_x.stderr.strip()}")
        # KServe with request parameters, FP64 rows (converted as the CLI converts them).
        X = np.array([[float(v) if v.strip() and v.strip().lower() != "nan" else float("nan")
                       for v in row.split(",")] for row in lines(x_path, range(ROWS))])
        inp = grpcclient.InferInput("input__0", list(X.shape), "FP64")
        inp.set_data_from_numpy(X)
        res = client.infer(name, [inp], outputs=[grpcclient.InferRequestedOutput(
            "treeshap_output")], parameters={"method": "interventional", "output_space": space})
        got = res.as_numpy("treeshap_output").reshape(X.shape[0], -1).tolist()
        h.compare(f, f"{name} {space} treeshap_output", got,
                  h.read_csv(local.stdout, is_text=True))
        compared.append((name, space))


def main():
    args = h.parse_args()
    try:
        import numpy as np
        import tritonclient.grpc as grpcclient
    except ImportError as e:
        h.skip(f"numpy / tritonclient[grpc] missing: {e}")
    f = h.Failures()
    repo = tempfile.mkdtemp(prefix="grove_repo_interventional_")
    work = tempfile.mkdtemp(prefix="grove_interventional_")
    cases = []
    for i, (name, d, meta, model) in enumerate(h.corpus_cases(args.source_dir)):
        h.install_model(repo, name, 1, model)
        bg = write_background(np, d, os.path.join(repo, name), npy=i % 2 == 1)
        x_path = os.path.join(work, name + "_X.csv")
        with open(x_path, "w") as out:
            out.write("\n".join(lines(os.path.join(d, "X.csv"), range(ROWS))) + "\n")
        if bg is not None:
            cases.append((name, x_path, bg, model))
    nobg = cases[0]
    h.install_model(repo, "no_background", 1, nobg[3])
    try:
        with h.Groved(args.groved, repo, ["--strict_readiness=false",
                                          "--repository_poll_seconds=0"]) as server:
            client = grpcclient.InferenceServerClient(url=server.target)
            h.wait_ready(lambda: client.is_server_ready())
            compared = []
            for name, x_path, bg, model in cases:
                if not client.is_model_ready(name):
                    continue
                inspect = grove(args.grove, ["inspect", "--server", server.target, "--model",
                                             name, "--json"])
                if f.check(inspect.returncode == 0, f"{name}: inspect: {inspect.stderr}"):
                    f.check(json.loads(inspect.stdout).get("background_rows") == len(BACKGROUND),
                            f"{name}: inspect --server: {inspect.stdout}")
                check_case(f, args, np, grpcclient, client, server, name, x_path, bg, model,
                           compared)
            r = grove(args.grove, ["explain", "--server", server.target, "--model",
                                   "no_background", "--input", nobg[1], "--method",
                                   "interventional"])
            # The file to add, named relative to the repository (callers never see its path).
            f.check(r.returncode != 0 and "FAILED_PRECONDITION" in r.stderr and
                    os.path.join("no_background", "background.csv") in r.stderr and
                    repo not in r.stderr,
                    f"no background: {r.returncode} {r.stderr}")
            print(f"compared {len(compared)} (model, output space) pairs: "
                  + ", ".join(f"{n} {s}" for n, s in compared))
            for space in SPACES:
                f.check(sum(s == space for _, s in compared) >= 5, f"fewer than 5 cases in {space}")
    finally:
        shutil.rmtree(repo, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    f.finish("interventional")


if __name__ == "__main__":
    main()

"""docs/api.md's examples, run as a user would, from a directory laid out like the repository root,
against a groved serving examples/models (its address put where the examples say localhost:8001):

  * "The `grove` CLI": the sh block; its pred.csv must be byte for byte the local CLI's, as the
    text says;
  * "Python with stubs generated from proto/": the sh block (stub generation), then the python
    block; its predictions must equal the local CLI's;
  * "KServe v2 / tritonclient": the python block; output__0's positive-class column must equal the
    local CLI's predictions;
  * "Path-dependent or interventional SHAP": the sh block; the served and the local interventional
    probability-space values must be byte for byte the same, and each row must sum to the row's
    predicted probability.
  * "Banzhaf values": the sh block; the served and the local Banzhaf values must be byte for byte
    the same, the bias the local SHAP bias, and some row's sum not its margin (not additive);
  * "Feature groups": the sh block; the served and the local group values must be byte for byte
    the same, headed by the groups' names, and each row must sum to the row's margin;
  * "KServe v2 REST": the sh block (curl, every command must succeed) and the python block
    (tritonclient.http), whose positive-class column must equal the local CLI's predictions;
  * "Shared memory": the python block (tritonclient's shared memory calls, against a groved with
    --shared_memory), whose positive-class column must equal the local CLI's predictions;
  * docs/triton-migration.md's example: the python block, over gRPC and REST (its own asserts
    compare the class output with the probabilities);
  * docs/performance.md's "Measure it yourself" commands (but the groved line, which the harness
    stands for), with 1-second durations: each must succeed;
  * "C++": the cpp block, compiled as written by the build (api_md_cpp_example, generated from this
    file by api_md_cpp_example.py) and run against groved: its prediction and margin must be byte
    for byte the local CLI's for the example's row, its SHAP values the local `grove explain`'s and
    its top 3 features those of the largest |SHAP|;
  * "Reflection": the python block (grpcio-reflection, no generated code): every service listed,
    its Predict byte for byte the local CLI's, ListModels naming demo ready, health SERVING.
    grpcurl is not packaged in Debian 12 and is named in prose only: no line of a code block in
    README.md or docs/ may be a grpcurl command, since no test could run it.
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groved_harness as h  # noqa: E402

STUBS = "## Python with stubs generated from `proto/`"
CLI = "## The `grove` CLI"
TRITON = "## KServe v2 / tritonclient"
INTERVENTIONAL = "## Path-dependent or interventional SHAP"
BANZHAF = "## Banzhaf values"
GROUPS = "## Feature groups"
REST = "## KServe v2 REST"
SHARED_MEMORY = "## Shared memory"
CPP = "## C++: `client/grove_client.h`"
REFLECTION = "## Reflection"
# The row of the C++ and reflection examples (NaN: missing).
EXAMPLE_ROW = "0.5,nan,2,0,0,0,0,0\n"
SERVICES = {"grove.v1.Grove", "inference.GRPCInferenceService", "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}


def blocks(text, title):
    """The fenced blocks of the section whose heading starts with `title`: {language: code}."""
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    section = text[start:end if end >= 0 else len(text)]
    return {m.group(1): m.group(2) for m in re.finditer(r"```(\w+)\n(.*?)```", section, re.S)}


def indented_commands(text, title):
    """The commands of the indented block under heading `title` (continuations joined, comments
    dropped)."""
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    lines = [l[4:] for l in text[start:end if end >= 0 else len(text)].splitlines()
             if l.startswith("    ")]
    commands, current = [], ""
    for line in lines:
        if line.lstrip().startswith("#"):
            continue
        current += line.strip()
        if current.endswith("\\"):
            current = current[:-1]
        else:
            commands.append(current)
            current = ""
    return commands


def run(failures, what, cmd, root, env=None):
    r = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=300, env=env)
    failures.check(r.returncode == 0, f"{what} failed:\n{r.stdout}{r.stderr}")
    return r


def check_interventional(failures, code, root, env, probabilities):
    """Runs the interventional sh block: served == local, rows sum to the predictions."""
    r = run(failures, "the interventional sh block", ["bash", "-e", "-c", code], root, env)
    if r.returncode != 0:
        return
    local = open(os.path.join(root, "local.csv")).read()
    served = open(os.path.join(root, "served.csv")).read()
    failures.check(local == served, "interventional: served.csv is not byte for byte local.csv")
    sums = [[sum(row)] for row in h.read_csv(os.path.join(root, "served.csv"))]
    h.compare(failures, "interventional row sums vs predictions", sums, probabilities, exact=False)


def check_banzhaf(failures, code, root, env, grove, model_file, rows):
    """Runs the Banzhaf sh block: served == local, the SHAP bias, not additive."""
    r = run(failures, "the Banzhaf sh block", ["bash", "-e", "-c", code], root, env)
    if r.returncode != 0:
        return
    local = open(os.path.join(root, "banzhaf_local.csv")).read()
    served = open(os.path.join(root, "banzhaf_served.csv")).read()
    failures.check(local == served, "Banzhaf: banzhaf_served.csv is not byte for byte local")
    banzhaf = h.read_csv(os.path.join(root, "banzhaf_local.csv"))
    shap = h.read_csv(subprocess.run([grove, "explain", "--model", model_file, "--input", rows,
                                      "--no-progress"], capture_output=True, text=True,
                                     timeout=300).stdout, is_text=True)
    h.compare(failures, "Banzhaf bias vs SHAP bias", [[row[-1]] for row in banzhaf],
              [[row[-1]] for row in shap], exact=False)
    failures.check(any(abs(sum(b) - sum(s)) > 1e-3 for b, s in zip(banzhaf, shap)),
                   "Banzhaf values sum to the margin on every row: the attribution was ignored")


def check_groups(failures, code, root, env, margins):
    """Runs the feature groups sh block: served == local, the header, rows sum to the margin."""
    r = run(failures, "the feature groups sh block", ["bash", "-e", "-c", code], root, env)
    if r.returncode != 0:
        return
    local = open(os.path.join(root, "groups_local.csv")).read()
    served = open(os.path.join(root, "groups_served.csv")).read()
    failures.check(local == served, "groups: groups_served.csv is not byte for byte local")
    header, _, body = local.partition("\n")
    failures.check(header == "head,f3,f4,tail,bias", f"groups: header {header!r}")
    sums = [[sum(row)] for row in h.read_csv(body, is_text=True)]
    h.compare(failures, "group values' row sums vs margins", sums, margins, exact=False)


def check_cpp(failures, program, target, local):
    """Runs the C++ example's program; compares with the local CLI's answers for EXAMPLE_ROW."""
    if not failures.check(bool(program) and os.access(program, os.X_OK),
                          f"the C++ example program {program!r} is not built (api_md_cpp_example)"):
        return
    r = subprocess.run([program, target], capture_output=True, text=True, timeout=120)
    if not failures.check(r.returncode == 0, f"the C++ example failed:\n{r.stdout}{r.stderr}"):
        return
    got = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines() if line.strip()}
    failures.check(got.get("prediction") == [local["prediction"]],
                   f"C++ example prediction {got.get('prediction')} != local {local['prediction']}")
    failures.check(got.get("margin") == [local["margin"]],
                   f"C++ example margin {got.get('margin')} != local {local['margin']}")
    failures.check(got.get("shap") == local["shap"],
                   f"C++ example SHAP values {got.get('shap')} != local {local['shap']}")
    contributions = [abs(float(v)) for v in local["shap"][:-1]]
    top = sorted(range(len(contributions)), key=lambda i: -contributions[i])[:3]
    failures.check(got.get("top") == [str(i) for i in top],
                   f"C++ example top features {got.get('top')} != {top}")
    print("api.md's C++ example:", r.stdout.strip().replace("\n", "; "))


def check_reflection(failures, code, root, local):
    """Runs the reflection python block; checks what it found and called."""
    r = run(failures, "the reflection python block", [sys.executable, "-c", code + """
import json
with open("reflection.json", "w") as out:
    json.dump({"services": services, "predicted": json.loads(predicted),
               "models": json.loads(models), "health": json.loads(health)}, out)
"""], root)
    if r.returncode != 0:
        return
    got = json.load(open(os.path.join(root, "reflection.json")))
    failures.check(SERVICES <= set(got["services"]), f"reflection listed {got['services']}")
    values = got["predicted"].get("prediction", {}).get("values", [])
    # protobuf's JSON mapping writes a float by its shortest float32 text: compared as float32.
    failures.check([h.f32(v) for v in values] == [h.f32(float(local["prediction"]))],
                   f"reflection Predict answered {got['predicted']}, local {local['prediction']}")
    failures.check(any(m.get("name") == "demo" and m.get("ready") for m in got["models"].get("models", [])),
                   f"reflection ListModels answered {got['models']}")
    failures.check(got["health"] == {"status": "SERVING"}, f"reflection health answered {got['health']}")


def no_grpcurl_commands(failures, source_dir):
    """No line of a code block (fenced, or indented 4 spaces) in README.md or docs/ runs grpcurl."""
    for path in [os.path.join(source_dir, "README.md")] + sorted(glob.glob(os.path.join(source_dir, "docs", "*.md"))):
        fenced = False
        for number, line in enumerate(open(path).read().splitlines(), 1):
            if line.startswith("```"):
                fenced = not fenced
                continue
            if (fenced or line.startswith("    ")) and re.match(r"\s*(\$\s*)?grpcurl\b", line):
                failures.check(False, f"{os.path.relpath(path, source_dir)}:{number}: a grpcurl command "
                                      "(no test can run grpcurl: it is not packaged in Debian 12)")


def local_answers(grove, model_file, root):
    """The local CLI's prediction, margin and SHAP values (%.9g text) for EXAMPLE_ROW."""
    row = os.path.join(root, "example_row.csv")
    with open(row, "w") as out:
        out.write(EXAMPLE_ROW)
    answer = {}
    for key, command in (("prediction", ["predict"]), ("margin", ["predict", "--kind", "margin"]),
                         ("shap", ["explain"])):
        r = subprocess.run([grove] + command + ["--model", model_file, "--input", row, "--no-progress"],
                           capture_output=True, text=True, timeout=300, check=True)
        values = r.stdout.strip().split(",")
        answer[key] = values if key == "shap" else values[0]
    return answer


def main():
    args = h.parse_args(["--cpp-example"])
    try:
        import grpc  # noqa: F401
        import grpc_tools  # noqa: F401
        import numpy  # noqa: F401
        import tritonclient.grpc  # noqa: F401
        import tritonclient.http  # noqa: F401
    except ImportError as e:
        h.skip(f"python packages missing: {e}")
    text = open(os.path.join(args.source_dir, "docs/api.md")).read()
    stubs, cli, triton = blocks(text, STUBS), blocks(text, CLI), blocks(text, TRITON)
    interventional = blocks(text, INTERVENTIONAL)
    banzhaf = blocks(text, BANZHAF)
    groups = blocks(text, GROUPS)
    rest = blocks(text, REST)
    shared = blocks(text, SHARED_MEMORY)
    cpp, reflection = blocks(text, CPP), blocks(text, REFLECTION)
    failures = h.Failures()
    no_grpcurl_commands(failures, args.source_dir)
    for name, b, langs in (("stubs", stubs, ("sh", "python")), ("cli", cli, ("sh",)),
                           ("tritonclient", triton, ("python",)),
                           ("interventional", interventional, ("sh",)),
                           ("Banzhaf", banzhaf, ("sh",)),
                           ("feature groups", groups, ("sh",)),
                           ("REST", rest, ("sh", "python")),
                           ("shared memory", shared, ("python",)), ("C++", cpp, ("cpp",)),
                           ("reflection", reflection, ("python",))):
        if not failures.check(all(l in b for l in langs), f"api.md's {name} section lacks {langs}"):
            return failures.finish("api_docs")
    rows = os.path.join(args.source_dir, "examples/rows.csv")
    model_dir = os.path.join(args.source_dir, "examples/models/demo/1")
    model_file = os.path.join(model_dir, sorted(os.listdir(model_dir))[0])
    local = subprocess.run([args.grove, "predict", "--model", model_file, "--input", rows,
                            "--no-progress"], capture_output=True, text=True, timeout=300)
    want = h.read_csv(local.stdout, is_text=True)
    with tempfile.TemporaryDirectory() as root, h.Groved(
            args.groved, os.path.join(args.source_dir, "examples/models"),
            ["--shared_memory"]) as server:
        for name in ("proto", "examples"):
            os.symlink(os.path.join(args.source_dir, name), os.path.join(root, name))
        at = lambda code: code.replace("localhost:8001", server.target)  # noqa: E731
        # The CLI: `grove` on PATH, as after installing it.
        env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(args.grove)) + ":" +
                   os.environ.get("PATH", ""))
        run(failures, "the CLI sh block", ["bash", "-e", "-c", at(cli["sh"])], root, env)
        pred = os.path.join(root, "pred.csv")
        failures.check(os.path.exists(pred) and open(pred).read() == local.stdout,
                       "the CLI example's pred.csv is not byte for byte the local CLI's")
        check_interventional(failures, at(interventional["sh"]), root, env, want)
        check_banzhaf(failures, at(banzhaf["sh"]), root, env, args.grove, model_file, rows)
        margins = h.read_csv(subprocess.run(
            [args.grove, "predict", "--model", model_file, "--input", rows, "--kind", "margin",
             "--no-progress"], capture_output=True, text=True, timeout=300).stdout, is_text=True)
        check_groups(failures, at(groups["sh"]), root, env, margins)
        # Python stubs.
        run(failures, "the stubs sh block", ["bash", "-e", "-c", stubs["sh"]], root)
        r = run(failures, "the stubs python block", [sys.executable, "-c", at(stubs["python"]) +
                "\nnp.savetxt('stub_pred.csv', pred, fmt='%.9g', delimiter=',')\n"], root)
        if r.returncode == 0:
            h.compare(failures, "stub example predictions",
                      h.read_csv(os.path.join(root, "stub_pred.csv")), want)
        # tritonclient: FIL's predict_proba [1 - p, p] for this binary classifier.
        r = run(failures, "the tritonclient python block", [sys.executable, "-c", at(
                triton["python"]) + "\nnp.savetxt('proba.csv', proba[:, 1:], fmt='%.9g', delimiter=',')\n"],
                root)
        if r.returncode == 0:
            h.compare(failures, "tritonclient example probabilities",
                      h.read_csv(os.path.join(root, "proba.csv")), want)
        print("api.md examples ran:", r.stdout.strip())
        # C++ (the program the build made from the cpp block) and reflection, for EXAMPLE_ROW.
        example = local_answers(args.grove, model_file, root)
        check_cpp(failures, args.cpp_example, server.target, example)
        check_reflection(failures, at(reflection["python"]), root, example)
        # REST: curl, then tritonclient.http, at the REST port.
        at_http = lambda code: code.replace("localhost:8000", f"127.0.0.1:{server.http_port}")  # noqa: E731
        run(failures, "the REST sh block", ["bash", "-e", "-c", at_http(rest["sh"])], root)
        r = run(failures, "the REST python block", [sys.executable, "-c", at_http(
                rest["python"]) + "\nnp.savetxt('rest.csv', proba[:, 1:], fmt='%.9g', delimiter=',')\n"],
                root)
        if r.returncode == 0:
            h.compare(failures, "tritonclient.http example probabilities",
                      h.read_csv(os.path.join(root, "rest.csv")), want)
        # Shared memory: tritonclient's helpers (with the pkg_resources stand-in where setuptools
        # no longer has it).
        r = run(failures, "the shared memory python block", [sys.executable, "-c",
                h.PKG_RESOURCES_SHIM + at(shared["python"]) +
                "\nnp.savetxt('shm.csv', proba[:, 1:], fmt='%.9g', delimiter=',')\n"], root)
        if r.returncode == 0:
            h.compare(failures, "shared memory example probabilities",
                      h.read_csv(os.path.join(root, "shm.csv")), want)
        # triton-migration.md's example, at both ports.
        migration = blocks(open(os.path.join(args.source_dir, "docs/triton-migration.md")).read(),
                           "## Example")
        if failures.check("python" in migration, "triton-migration.md's example lacks python"):
            r = run(failures, "the triton-migration python block",
                    [sys.executable, "-c", at_http(at(migration["python"]))], root)
            failures.check("65536" in r.stdout, f"triton-migration example printed {r.stdout!r}")
        # performance.md's commands, against this groved, built programs where they say build/cpu.
        perf = open(os.path.join(args.source_dir, "docs/performance.md")).read()
        commands = indented_commands(perf, "## Measure it yourself")
        failures.check(len(commands) == 4 and "groved" in commands[0],
                       f"performance.md's commands changed: {commands}")
        bin_dir = os.path.dirname(os.path.abspath(args.grove))
        for c in commands[1:]:
            c = (c.replace("build/cpu/bin/", bin_dir + "/").replace("--duration 10", "--duration 1")
                 .replace("localhost:8001", server.target)
                 .replace("127.0.0.1:8000", f"127.0.0.1:{server.http_port}"))
            run(failures, f"performance.md: {c}", ["bash", "-e", "-c", c], args.source_dir)
    return failures.finish("api_docs")


if __name__ == "__main__":
    sys.exit(main())

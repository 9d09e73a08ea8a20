"""docs/api.md's Python example, run as a user would: the `sh` block (stub generation) and the
`python` block of "Python with stubs generated from proto/", from a directory laid out like the
repository root, against a groved serving examples/models (its address put where the example says
localhost:8001). The example's predictions must equal the local `grove` CLI's.
"""

import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groved_harness as h  # noqa: E402

SECTION = "## Python with stubs generated from `proto/`"


def blocks(text):
    """The section's fenced blocks: {language: code}."""
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start:end if end >= 0 else len(text)]
    return {m.group(1): m.group(2) for m in re.finditer(r"```(\w+)\n(.*?)```", section, re.S)}


def main():
    args = h.parse_args()
    try:
        import grpc  # noqa: F401
        import grpc_tools  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        h.skip(f"python packages missing: {e}")
    doc = blocks(open(os.path.join(args.source_dir, "docs/api.md")).read())
    failures = h.Failures()
    if not failures.check("sh" in doc and "python" in doc,
                          f"api.md's section has no sh/python block: {doc}"):
        return failures.finish("api_docs")
    with tempfile.TemporaryDirectory() as root, h.Groved(
            args.groved, os.path.join(args.source_dir, "examples/models")) as server:
        for name in ("proto", "examples"):
            os.symlink(os.path.join(args.source_dir, name), os.path.join(root, name))
        r = subprocess.run(["bash", "-e", "-c", doc["sh"]], cwd=root, capture_output=True, text=True,
                           timeout=300)
        if not failures.check(r.returncode == 0, f"the sh block failed:\n{r.stdout}{r.stderr}"):
            return failures.finish("api_docs")
        code = doc["python"].replace("localhost:8001", server.target) + (
            "\nnp.savetxt('pred.csv', pred, fmt='%.9g', delimiter=',')\n")
        r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                           timeout=300)
        if not failures.check(r.returncode == 0, f"the python block failed:\n{r.stdout}{r.stderr}"):
            return failures.finish("api_docs")
        rows = os.path.join(args.source_dir, "examples/rows.csv")
        model = os.path.join(args.source_dir, "examples/models/demo/1")
        model_file = os.path.join(model, sorted(os.listdir(model))[0])
        want = h.local_cli(args.grove, ["predict", "--kind", "prediction"], model_file, rows)
        got = h.read_csv(os.path.join(root, "pred.csv"))
        h.compare(failures, "api.md example predictions", got, want)
        print(f"api.md example: {r.stdout.strip()}")
    return failures.finish("api_docs")


if __name__ == "__main__":
    sys.exit(main())

"""The CPU wheel (scripts/build-wheel.sh) installed into a fresh virtual environment and used from
there alone (wheel_check.py: no PYTHONPATH, no LD_LIBRARY_PATH, every native library from the
wheel): `grove --version` and `groved --version` through the console commands, `grove explain` of
the wheel equal bit for bit to this build's, and docs/python.md's examples (docs_test.py) with the
installed package and the installed groved. Last, the same wheel renamed as build-wheel.sh --cuda
renames its CUDA build (scripts/rename_wheel.py) installs as the distribution groveml-cu13.

The wheel is built in $GROVEML_WHEEL_BUILD_DIR, kept between runs of one build tree, so that a
second run recompiles only what changed.
"""

import os
import subprocess
import sys

import numpy as np
from conftest import SOURCE_DIR, assert_bitwise, need, run_cli
from wheel_check import (VERSION, build_wheel, check_record, check_versions, install,
                         need_wheel_tools)

MODEL = os.path.join(SOURCE_DIR, "examples", "models", "demo", "1", "model.json")
ROWS = os.path.join(SOURCE_DIR, "examples", "rows.csv")


def test_wheel_in_a_fresh_venv(cli, tmp_path):
    need_wheel_tools()
    build_dir = os.environ.get("GROVEML_WHEEL_BUILD_DIR") or str(tmp_path / "wheel-build")
    wheel = build_wheel(tmp_path / "dist", build_dir)
    assert wheel.name.startswith(f"groveml-{VERSION}-"), wheel.name
    check_record(wheel)
    venv = tmp_path / "venv"
    python, env, _ = install(wheel, venv, build_dir)
    check_versions(env, cuda="no")

    r = subprocess.run(["grove", "explain", "--model", MODEL, "--input", ROWS, "--no-progress"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    got = np.array([[float(v) for v in line.split(",")] for line in r.stdout.split()],
                   dtype=np.float64).astype(np.float32)
    assert_bitwise(got, run_cli(cli, ["explain"], MODEL, ROWS), "the wheel's grove")

    # docs/python.md's examples, with the installed package and the installed groved.
    need("pytest")
    env["GROVED"] = str(venv / "bin" / "groved")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    r = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                        os.path.join(SOURCE_DIR, "tests", "python", "docs_test.py")],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=900)
    assert r.returncode == 0 and " passed" in r.stdout and "skipped" not in r.stdout, (
        f"docs/python.md's examples with the wheel:\n{r.stdout[-8000:]}\n{r.stderr[-3000:]}")

    # The CUDA variant's name on the same files (wheel_cuda_test.py builds the real one where nvcc
    # is): installed, it is the distribution groveml-cu13 with the import name groveml.
    r = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "scripts", "rename_wheel.py"),
                        str(wheel), "groveml-cu13", str(tmp_path / "renamed")],
                       capture_output=True, text=True, check=True)
    renamed = type(wheel)(r.stdout.strip())
    assert renamed.name == wheel.name.replace("groveml-", "groveml_cu13-", 1), renamed.name
    check_record(renamed)
    venv_cu = tmp_path / "venv-cu13"
    python_cu, env_cu, _ = install(renamed, venv_cu, build_dir)
    r = subprocess.run([python_cu, "-c", "import importlib.metadata as m; "
                        "print(m.distribution('groveml-cu13').metadata['Name'])"],
                       capture_output=True, text=True, env=env_cu, check=True)
    assert r.stdout.strip() == "groveml-cu13", r.stdout
    check_versions(env_cu, cuda="no")

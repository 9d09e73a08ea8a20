"""`pip install .` from this checkout into a fresh virtual environment (system site packages for
the build tools and numpy, no network: --no-build-isolation), then `import groveml` there explains
the demo model with `grove explain`'s numbers bit for bit, and its client's stubs import; the
console commands `grove` and `groved`, which only a wheel bundles executables for (wheel_test.py),
say so. The extension is compiled by
scikit-build-core from this repository's CMake build (in $GROVEML_PIP_BUILD_DIR, kept between runs
of one build tree)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
from conftest import SOURCE_DIR, assert_bitwise, need, run_cli


def test_pip_install_then_explain(cli, tmp_path):
    need("scikit_build_core")
    need("nanobind")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = "2"  # the machine's cores, not ninja's default of more
    build_dir = os.environ.get("GROVEML_PIP_BUILD_DIR") or str(tmp_path / "build")
    r = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                        "--disable-pip-version-check", "-q", f"-Cbuild-dir={build_dir}",
                        SOURCE_DIR],
                       capture_output=True, text=True, env=env, timeout=1200)
    assert r.returncode == 0, f"pip install . failed:\n{r.stdout[-5000:]}\n{r.stderr[-5000:]}"
    model = os.path.join(SOURCE_DIR, "examples", "models", "demo", "1", "model.json")
    rows = os.path.join(SOURCE_DIR, "examples", "rows.csv")
    out = tmp_path / "shap.npy"
    script = textwrap.dedent(f"""
        import numpy as np, groveml
        assert groveml.__file__.startswith({str(venv)!r}), groveml.__file__
        x = np.loadtxt({rows!r}, delimiter=",")
        np.save({str(out)!r}, groveml.Model({model!r}).explain(x))
        groveml.Client("127.0.0.1:1").close()  # the installed grove.v1 stubs import
    """)
    r = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env,
                       cwd=str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stderr
    assert_bitwise(np.load(out), run_cli(cli, ["explain"], model, rows), "installed package")
    for command in ("grove", "groved"):
        r = subprocess.run([str(venv / "bin" / command), "--version"], capture_output=True,
                           text=True, env=env, timeout=60)
        assert r.returncode == 127 and "scripts/build-wheel.sh" in r.stderr, (command, r.stderr)

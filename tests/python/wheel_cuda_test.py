"""The CUDA wheel (scripts/build-wheel.sh --cuda: the distribution groveml-cu13), where the CUDA
toolkit is installed (/usr/local/cuda; skipped otherwise, CUDA being optional): built, installed
into a fresh virtual environment and checked as the CPU wheel is (wheel_check.py: every native
library from the wheel, the CUDA runtime included, the driver's libcuda never), its commands
report the CUDA engines, and the installed package explains with `grove explain`'s numbers bit for
bit on the CPU; where a GPU is visible, on the GPU too within float32 rounding.

The wheel is built in $GROVEML_CUDA_WHEEL_BUILD_DIR, kept between runs of one build tree.
"""

import os
import subprocess
import textwrap

import numpy as np
import pytest
from conftest import SOURCE_DIR, assert_bitwise, run_cli
from wheel_check import (VERSION, build_wheel, check_record, check_versions, install,
                         need_wheel_tools)

MODEL = os.path.join(SOURCE_DIR, "examples", "models", "demo", "1", "model.json")
ROWS = os.path.join(SOURCE_DIR, "examples", "rows.csv")


def test_cuda_wheel_in_a_fresh_venv(cli, tmp_path):
    if not os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
        pytest.skip("no CUDA toolkit at /usr/local/cuda: the CUDA wheel is not built")
    need_wheel_tools()
    build_dir = os.environ.get("GROVEML_CUDA_WHEEL_BUILD_DIR") or str(tmp_path / "wheel-build")
    wheel = build_wheel(tmp_path / "dist", build_dir, "--cuda")
    assert wheel.name.startswith(f"groveml_cu13-{VERSION}-"), wheel.name
    check_record(wheel)
    venv = tmp_path / "venv"
    python, env, native = install(wheel, venv, build_dir)
    assert any(n.startswith("libcudart") for n in native), sorted(native)
    assert not any(n.startswith("libcuda.") or n.startswith("libcuda-") for n in native), native
    check_versions(env, cuda="yes")

    out = tmp_path / "shap"
    script = textwrap.dedent(f"""
        import numpy as np, groveml
        assert groveml.has_cuda
        x = np.loadtxt({ROWS!r}, delimiter=",")
        np.save({str(out) + "_cpu.npy"!r}, groveml.Model({MODEL!r}, device="cpu").explain(x))
        if groveml.visible_gpus() > 0:
            np.save({str(out) + "_gpu.npy"!r}, groveml.Model({MODEL!r}, device="cuda").explain(x))
    """)
    r = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env,
                       cwd=str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stderr
    want = run_cli(cli, ["explain"], MODEL, ROWS)
    assert_bitwise(np.load(str(out) + "_cpu.npy"), want, "the CUDA wheel on the CPU")
    if os.path.exists(str(out) + "_gpu.npy"):
        gpu = np.load(str(out) + "_gpu.npy").reshape(want.shape)
        np.testing.assert_allclose(gpu, want, rtol=1e-5, atol=1e-5)

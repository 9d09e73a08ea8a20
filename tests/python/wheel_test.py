"""The CPU wheel (scripts/build-wheel.sh) installed into a fresh virtual environment and used from
there alone: no PYTHONPATH, no LD_LIBRARY_PATH, nothing of the build tree on any path.

The wheel is built in $GROVEML_WHEEL_BUILD_DIR (kept between runs of one build tree, so that a
second run recompiles only what changed). The virtual environment sees the system's site packages
for groveml's Python dependencies (numpy, grpcio, ...: pip installs with --no-index, so that they
must be there already and nothing is downloaded); the native libraries must all come from the wheel:
ldd of each executable and shared object installed must resolve every library inside the
environment or to a library the manylinux policy takes from the system (glibc's, the GCC runtime,
zlib), never to the build tree, /usr/local or a Debian package's library such as Abseil's. Then `grove --version` and `groved --version` through
the console commands, `grove explain` of the wheel equal bit for bit to this build's, and
docs/python.md's examples (tests/python/docs_test.py) with the installed package and groved.
Last, the same wheel renamed as build-wheel.sh --cuda renames its CUDA build (groveml-cu13:
scripts/rename_wheel.py) installs under that name with its RECORD intact.
"""

import os
import re
import shutil
import subprocess
import sys

import base64
import csv
import hashlib
import io
import zipfile

import numpy as np
from conftest import SOURCE_DIR, assert_bitwise, need, need_binary, require_tools, run_cli

# What the manylinux policies let a wheel take from the system (glibc's libraries, the GCC runtime,
# zlib; the X11 and GL ones are of no use here), so auditwheel does not bundle them.
SYSTEM_LIBRARIES = {"linux-vdso.so.1", "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6",
                    "libmvec.so.1", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libanl.so.1",
                    "libnsl.so.1", "libutil.so.1", "libresolv.so.2", "libstdc++.so.6",
                    "libgcc_s.so.1", "libatomic.so.1", "libz.so.1"}


def clean_env(venv):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), "/usr/bin", "/bin"])
    return env


def wheel_build_dir(tmp_path):
    return os.environ.get("GROVEML_WHEEL_BUILD_DIR") or str(tmp_path / "wheel-build")


def build_wheel(out, build_dir):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["PYTHON"] = sys.executable
    r = subprocess.run(["bash", os.path.join(SOURCE_DIR, "scripts", "build-wheel.sh"),
                        "--build-dir", build_dir, "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=3000)
    assert r.returncode == 0, f"build-wheel.sh failed:\n{r.stdout[-5000:]}\n{r.stderr[-5000:]}"
    wheels = [f for f in os.listdir(out) if f.endswith(".whl")]
    assert len(wheels) == 1, wheels
    wheel = out / wheels[0]
    # The platform tag auditwheel gave: manylinux, never the bare linux_x86_64 pip cannot install
    # elsewhere.
    assert re.search(r"-manylinux_2_\d+_x86_64\.whl$", wheel.name), wheel.name
    print(r.stdout)
    return wheel


def elf_files(root):
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    yield path


def check_libraries(path, venv, forbidden):
    r = subprocess.run(["ldd", path], capture_output=True, text=True, env=clean_env(venv))
    assert r.returncode == 0, f"ldd {path}: {r.stderr}"
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(\S+)(?: => (\S+))? \(0x", line)
        assert m or "statically linked" in line, f"ldd {path}: unexpected line {line!r}"
        if not m:
            continue
        name, where = m.group(1), m.group(2) or m.group(1)
        assert "not found" not in line, f"{path} needs {name}, which nothing provides: {line}"
        inside = os.path.realpath(where).startswith(str(venv) + os.sep)
        assert inside or os.path.basename(name) in SYSTEM_LIBRARIES, (
            f"{path} loads {name} from {where}: the wheel does not bundle it")
        assert not where.startswith(forbidden), (path, line)


def check_record(wheel):
    """Every file of the wheel is in its RECORD with its size and sha256, and nothing else is."""
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if not n.endswith("/")]  # folders are not listed
        record_name = next(n for n in names if re.fullmatch(r"[^/]+\.dist-info/RECORD", n))
        rows = list(csv.reader(io.StringIO(z.read(record_name).decode())))
        listed = {row[0] for row in rows}
        assert listed == set(names), f"{wheel.name}: RECORD and the files differ: " \
            f"{sorted(listed ^ set(names))[:5]}"
        for path, digest, size in rows:
            if path == record_name:
                continue
            data = z.read(path)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={want}" and int(size) == len(data), f"{wheel.name}: {path}"


def fresh_venv(path):
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(path)], check=True)
    return str(path / "bin" / "python")


def pip_install(python, wheel, env):
    r = subprocess.run([python, "-m", "pip", "install", "--no-index", "--disable-pip-version-check",
                        "-q", str(wheel)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, f"pip install {wheel.name} failed:\n{r.stdout}\n{r.stderr}"


def test_wheel_in_a_fresh_venv(cli, tmp_path):
    for module in ("scikit_build_core", "nanobind", "auditwheel"):
        need(module)
    if shutil.which("patchelf") is None:
        assert not require_tools(), "patchelf is missing (scripts/install-deps.sh installs it)"
        import pytest
        pytest.skip("patchelf is missing")
    build_dir = wheel_build_dir(tmp_path)
    wheel = build_wheel(tmp_path / "dist", build_dir)
    check_record(wheel)

    venv = tmp_path / "venv"
    python = fresh_venv(venv)
    env = clean_env(venv)
    pip_install(python, wheel, env)

    r = subprocess.run([python, "-c", "import groveml, os; print(os.path.dirname(groveml.__file__))"],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path), check=True)
    package = r.stdout.strip()
    assert package.startswith(str(venv) + os.sep), package
    site = os.path.dirname(package)
    elves = list(elf_files(package)) + list(elf_files(os.path.join(site, "groveml.libs")))
    names = {os.path.basename(p) for p in elves}
    assert {"grove", "groved"} <= names and any(n.startswith("_core.") for n in names), names
    for path in elves:
        check_libraries(path, venv, ("/usr/local/", SOURCE_DIR, os.path.realpath(build_dir)))

    for command, want in (("grove", "grove 0.1.0 (CUDA engines: no; remote mode: yes)"),
                          ("groved", "groved 0.1.0 (CUDA engines: no)")):
        r = subprocess.run([command, "--version"], capture_output=True, text=True, env=env,
                           cwd=str(tmp_path), timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == want, (command, r.stdout, r.stderr)

    model = os.path.join(SOURCE_DIR, "examples", "models", "demo", "1", "model.json")
    rows = os.path.join(SOURCE_DIR, "examples", "rows.csv")
    r = subprocess.run(["grove", "explain", "--model", model, "--input", rows, "--no-progress"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    got = np.array([[float(v) for v in line.split(",")] for line in r.stdout.split()],
                   dtype=np.float64).astype(np.float32)
    assert_bitwise(got, run_cli(cli, ["explain"], model, rows), "the wheel's grove")

    # docs/python.md's examples, with the installed package and the installed groved.
    need("pytest")
    env["GROVED"] = str(venv / "bin" / "groved")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    r = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                        os.path.join(SOURCE_DIR, "tests", "python", "docs_test.py")],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=900)
    assert r.returncode == 0 and " passed" in r.stdout and "skipped" not in r.stdout, (
        f"docs/python.md's examples with the wheel:\n{r.stdout[-8000:]}\n{r.stderr[-3000:]}")

    # The CUDA variant's name on the same files (the CUDA build itself needs nvcc and is not built
    # here): installed, it is the distribution groveml-cu13 with the import name groveml.
    r = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "scripts", "rename_wheel.py"),
                        str(wheel), "groveml-cu13", str(tmp_path / "renamed")],
                       capture_output=True, text=True, check=True)
    renamed = type(wheel)(r.stdout.strip())
    assert renamed.name == wheel.name.replace("groveml-", "groveml_cu13-", 1), renamed.name
    check_record(renamed)
    venv_cu = tmp_path / "venv-cu13"
    python_cu = fresh_venv(venv_cu)
    env_cu = clean_env(venv_cu)
    pip_install(python_cu, renamed, env_cu)
    r = subprocess.run([python_cu, "-c", "import importlib.metadata as m, groveml; "
                        "print(m.distribution('groveml-cu13').metadata['Name'], groveml.__file__)"],
                       capture_output=True, text=True, env=env_cu, cwd=str(tmp_path), check=True)
    name, where = r.stdout.split()
    assert name == "groveml-cu13" and where.startswith(str(venv_cu) + os.sep), r.stdout
    r = subprocess.run(["groved", "--version"], capture_output=True, text=True, env=env_cu,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("groved 0.1.0"), (r.stdout, r.stderr)

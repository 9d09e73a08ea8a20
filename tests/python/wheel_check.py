"""What the wheel tests share (wheel_test.py: the CPU wheel, wheel_cuda_test.py: groveml-cu13):
building a wheel with scripts/build-wheel.sh, a fresh virtual environment to install it into, and
the checks of what was installed.

The virtual environment sees the system's site packages for groveml's Python dependencies (numpy,
grpcio, ...): pip installs with --no-index, so that they must be there already and nothing is
downloaded. The native libraries must all come from the wheel: ldd of each executable and shared
object installed must resolve every library inside the environment or to a library the manylinux
policy takes from the system (glibc's, the GCC runtime, zlib), never to the build tree, /usr/local
or a Debian package's library such as Abseil's. Commands run with PATH holding the environment's
bin/ and the system's, and no PYTHONPATH, LD_LIBRARY_PATH or LD_PRELOAD.
"""

import base64
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
from conftest import SOURCE_DIR, need, require_tools

# The version the wheels carry (pyproject.toml; grove and groved print CMakeLists.txt's, the same).
with open(os.path.join(SOURCE_DIR, "pyproject.toml")) as f:
    VERSION = re.search(r'^version = "([^"]+)"$', f.read(), re.M).group(1)

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


def need_wheel_tools():
    """The tools scripts/build-wheel.sh needs, or the test skipped (failed where every tool must
    be there)."""
    for module in ("scikit_build_core", "nanobind", "grpc_tools", "auditwheel"):
        need(module)
    if shutil.which("patchelf") is None:
        assert not require_tools(), "patchelf is missing (scripts/install-deps.sh installs it)"
        pytest.skip("patchelf is missing")


def build_wheel(out, build_dir, *options):
    """scripts/build-wheel.sh into the folder `out`, which then holds one wheel: its path."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["PYTHON"] = sys.executable
    r = subprocess.run(["bash", os.path.join(SOURCE_DIR, "scripts", "build-wheel.sh"),
                        "--build-dir", build_dir, "--out", str(out), *options],
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
    """Every library `path` loads resolves inside `venv` or is one the system provides."""
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


def install(wheel, venv, build_dir):
    """The wheel installed into a fresh virtual environment at `venv`, its native files checked:
    (the environment's python, the environment to run commands in, the installed package's path)."""
    python = fresh_venv(venv)
    env = clean_env(venv)
    pip_install(python, wheel, env)
    where = "import groveml, os; print(os.path.dirname(groveml.__file__))"
    r = subprocess.run([python, "-c", where],
                       capture_output=True, text=True, env=env, cwd=str(venv), check=True)
    package = r.stdout.strip()
    assert package.startswith(str(venv) + os.sep), package
    elves = list(elf_files(package)) + list(
        elf_files(os.path.join(os.path.dirname(package), "groveml.libs")))
    names = {os.path.basename(p) for p in elves}
    assert {"grove", "groved"} <= names and any(n.startswith("_core.") for n in names), names
    for path in elves:
        check_libraries(path, venv, ("/usr/local/", SOURCE_DIR, os.path.realpath(build_dir)))
    return python, env, names


def check_versions(env, cuda):
    """`grove --version` and `groved --version` through the console commands."""
    for command, want in (("grove", f"grove {VERSION} (CUDA engines: {cuda}; remote mode: yes)"),
                          ("groved", f"groved {VERSION} (CUDA engines: {cuda})")):
        r = subprocess.run([command, "--version"], capture_output=True, text=True, env=env,
                           timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == want, (command, r.stdout, r.stderr)

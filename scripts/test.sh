#!/usr/bin/env bash
# Installs every dependency and runs every test Grove has on this machine.
#   1. scripts/install-deps.sh (apt-get + pip)
#   2. cpu preset, then cuda preset when nvcc is installed: build, both before any test, through one
#      compiler cache (ccache, in build/ccache unless CCACHE_DIR says otherwise) that the later
#      builds of the same sources with the same flags read from: the CUDA wheel and `pip install .`
#      (the cuda preset's compiles) and the container image's build stages (both presets', through
#      the Dockerfile's `ccache` build context, GROVE_IMAGE_CCACHE).
#      cpu preset: all CTest tests (unit, corpus, CLI, server end-to-end, deploy, the
#      Python package and its wheels: scripts/build-wheel.sh's, installed into fresh virtual
#      environments, the CUDA wheel too when nvcc is installed: about 3 minutes together from the
#      cache, 24 without; and the container image: label `image`, both
#      Dockerfile variants built with podman and the CPU image run as the manifests run it, about
#      3 minutes alone with the cache, 13 without); GPU tests are only built with CUDA and skip
#      cleanly without a GPU.
#   3. cuda preset when nvcc is installed: the CUDA code must compile; its tests run (GPU tests when a
#      GPU is visible, skipped otherwise; GROVE_TEST_CUDA=0 turns this step off).
#   4. libFuzzer targets for every parser of untrusted bytes (model loaders, config.json, CSV, the
#      grove.v1 and KServe request converters, the access-control files), 30 s each by default,
#      under ASan/UBSan (GROVE_FUZZ_SECONDS).
set -euo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
stamp() { echo "== test.sh [$(( $(date +%s) - START ))s] $*"; }

# Every tool the tests use is installed below, so a missing one is a failure, not a skip.
export GROVE_E2E_REQUIRE_TOOLS=1

stamp "installing dependencies"
scripts/install-deps.sh

# One compiler cache for every build below (see the header; scripts/ccache-compile says how builds
# in different folders share it).
export CCACHE_DIR=${CCACHE_DIR:-$PWD/build/ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-10G}
for lang in C CXX CUDA; do export "CMAKE_${lang}_COMPILER_LAUNCHER=$PWD/scripts/ccache-compile"; done
export GROVE_IMAGE_CCACHE=$CCACHE_DIR
# The compilers CMake picks by default, by the names it picks them by (ccache hashes the name):
# scikit-build-core would otherwise give the wheels' builds Python's CC and CXX (gcc, g++).
export CC=${CC:-cc} CXX=${CXX:-c++}
with_cuda=0
if [ "${GROVE_TEST_CUDA:-1}" != 0 ] && [ -x /usr/local/cuda/bin/nvcc ]; then with_cuda=1; fi

stamp "building (cpu preset)"
scripts/build.sh cpu
if [ "$with_cuda" = 1 ]; then
  stamp "building (cuda preset)"
  scripts/build.sh cuda
fi
ccache --show-stats || true
stamp "testing (cpu preset)"
# The image test builds the GPU image with this machine's CUDA toolkit; without one it says so and
# builds the CPU image only (as the cuda preset step below is left out).
if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "NOTE: no CUDA toolkit at /usr/local/cuda: the GPU image is not built (GROVE_IMAGE_CUDA=0)"
  export GROVE_IMAGE_CUDA=0
fi
(cd build/cpu && ctest --output-on-failure -j "$(nproc)" --timeout 900)

ccache --show-stats || true
if [ "$with_cuda" = 1 ]; then
  stamp "testing (cuda preset; GPU tests skip without a GPU)"
  (cd build/cuda && ctest --output-on-failure -j "$(nproc)" --timeout 900 -L "gpu|cpu")
fi

stamp "fuzzing parsers"
GROVE_FUZZ_SECONDS=${GROVE_FUZZ_SECONDS:-30} scripts/fuzz.sh

stamp "all tests passed"

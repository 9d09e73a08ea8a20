#!/usr/bin/env bash
# Configures and builds Grove with a CMake preset (see CMakePresets.json) into build/<preset>.
#   scripts/build.sh            cpu preset (works everywhere)
#   scripts/build.sh cuda       CUDA engines for sm_90 (needs /usr/local/cuda)
#   scripts/build.sh asan       AddressSanitizer + UBSan, CPU only
# Extra arguments go to the build tool (e.g. a target name: scripts/build.sh cpu groved).
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=${1:-cpu}
shift || true
if [ "$PRESET" = cuda ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
cmake --preset "$PRESET" >/dev/null
cmake --build "build/$PRESET" -j "${GROVE_JOBS:-$(nproc)}" ${1:+--target "$@"}

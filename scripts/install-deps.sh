#!/usr/bin/env bash
# Installs every build, test and tool dependency of Grove on Debian 12 (run as root or with sudo).
# Idempotent: re-running only checks that the packages are present.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libgtest-dev libgmock-dev googletest libbenchmark-dev
  libsimdjson-dev nlohmann-json3-dev zlib1g-dev libssl-dev libc-ares-dev libre2-dev
  clang libclang-rt-14-dev
  prometheus yamllint
  python3 python3-pip python3-venv
)

missing=()
# kubectl (for `kubectl kustomize`): Debian's kubernetes-client, unless another kubectl is already there.
command -v kubectl >/dev/null 2>&1 || APT_PACKAGES+=(kubernetes-client)
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Python tools used by the tests (golden corpus generation, grpcio stubs, tritonclient interop).
PY=${PYTHON:-python3}
PIP_PACKAGES=(numpy pandas "xgboost>=3.0" "lightgbm>=4.5" grpcio grpcio-tools "tritonclient[grpc]")
if ! $PY -c "import xgboost, lightgbm, grpc, grpc_tools, tritonclient.grpc" 2>/dev/null; then
  $PY -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}" 2>/dev/null \
    || $PY -m pip install -q --disable-pip-version-check --break-system-packages "${PIP_PACKAGES[@]}"
fi
echo "install-deps: all dependencies present"

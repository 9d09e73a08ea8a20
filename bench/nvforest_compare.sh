#!/usr/bin/env bash
# Prediction against nvForest: for every model, nvForest's bench (the anchor, optimize()d
# per batch) and grove_predict_bench --mode compare on the same rows and batch sizes, in one run on
# one GPU; then the side-by-side table (bench/common/compare_table.py).
#
# usage: bench/nvforest_compare.sh RUNNER NVFOREST_DIR OUT_DIR BATCHES MODEL:ROWS.csv [...]
#   RUNNER        command prefix running Grove binaries by name ("" or a bundle's DIR/run)
#   NVFOREST_DIR  folder with nvforest-site.tar.xz and nvforest_bench.py (../shared/anchors/nvforest)
#   BATCHES       e.g. 100,10000,1000000
#   MODEL:ROWS    a model file (.ubj/.json/.txt) and its rows CSV (label column allowed)
# Writes OUT_DIR/<name>.{nvf,grove}.txt and prints the table (also OUT_DIR/table.md).
# Grove's end-to-end calls wait for the GPU as in-process callers' do (--gpu-wait poll: the CLI's and
# groveml's engines), since nvForest is timed in process; GROVE_COMPARE_GPU_WAIT=share times
# groved's wait instead.
set -uo pipefail
RUN=$1 NVF=$2 OUT=$3 BATCHES=$4
shift 4
SITE=${TMPDIR:-/tmp}/nvf-site
mkdir -p "$OUT" "$SITE"
[ -d "$SITE/nvforest" ] || tar -C "$SITE" -xJf "$NVF/nvforest-site.tar.xz"
BUDGET=${GROVE_COMPARE_BUDGET:-0.2}
for pair in "$@"; do
  model=${pair%%:*} rows=${pair#*:}
  name=$(basename "${model%.*}")
  echo "== $name"
  PYTHONPATH="$SITE" timeout 240 python3 "$NVF/nvforest_bench.py" "$model" "$rows" "$name" \
    --batches "$BATCHES" --budget "$BUDGET" >"$OUT/$name.nvf.txt" 2>"$OUT/$name.nvf.err" ||
    echo "nvforest failed on $name: $(tail -2 "$OUT/$name.nvf.err")"
  timeout 300 $RUN grove_predict_bench --model "$model" --rows "$rows" --name "$name" --mode compare \
    --batches "$BATCHES" --budget "$BUDGET" --gpu-wait "${GROVE_COMPARE_GPU_WAIT:-poll}" \
    >"$OUT/$name.grove.txt" 2>"$OUT/$name.grove.err" ||
    echo "grove failed on $name: $(tail -2 "$OUT/$name.grove.err")"
done
python3 "$(dirname "$0")/common/compare_table.py" "$OUT" | tee "$OUT/table.md"

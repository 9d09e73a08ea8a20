#!/usr/bin/env bash
# Scaling run: SHAP and predict rows/s of cal_housing-med on 1, 2, 4, 8 GPUs, engine level
# (grove_scaling_bench: staged and from registered memory, with the host's measured memory and DMA
# limits) and end to end through groved (grove bench), and a check that every GPU count gives
# bit-identical answers (the engine bench prints a hash of its output).
#
# usage: bench/scaling.sh RUNNER MODEL ROWS.csv OUT_DIR [GPU_COUNTS...]
#   RUNNER   a command prefix that runs the Grove binaries by name: "" when grove_scaling_bench,
#            groved and grove are on PATH, or a bundle's "DIR/run" (../shared/tools/bundle-for-device)
#   ROWS.csv rows with exactly the model's features (tiled to 1,000,000 rows by the engine bench)
# GPU counts above the number of visible GPUs are skipped. Prints markdown tables; exit 1 when the
# answers of different GPU counts differ.
set -uo pipefail
RUN=$1 MODEL=$2 ROWS=$3 OUT=$4
shift 4
COUNTS=${*:-1 2 4 8}
mkdir -p "$OUT"
NAME=$(basename "${MODEL%.*}")
pid=""
# A groved left running would keep this script's output open (and its GPUs busy).
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null' EXIT
# GROVE_SCALING_GPUS overrides the count (a CPU smoke test of this script uses 1 with
# GROVE_SCALING_ROWS=2000 GROVE_SCALING_EXPLAIN="quadrature_cpu").
avail=${GROVE_SCALING_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
ROWS_N=${GROVE_SCALING_ROWS:-1000000}
read -r -a EXPLAIN <<<"${GROVE_SCALING_EXPLAIN:-quadrature_gpu treeshap_gpu}"
echo "visible GPUs: $avail"
nvidia-smi -L 2>/dev/null
run() { if [ -n "$RUN" ]; then "$RUN" "$@"; else "$@"; fi; }

cat > "$OUT/config.json" <<'EOF'
{
  "max_request_rows": 1048576,
  "batching": {
    "predict": {"max_batch_rows": 1048576, "max_delay_us": 2000, "max_queue_rows": 8388608, "max_queue_requests": 4096},
    "explain": {"max_batch_rows": 262144, "max_delay_us": 2000, "max_queue_rows": 4194304, "max_queue_requests": 4096}
  }
}
EOF

for g in $COUNTS; do
  [ "$g" -le "$avail" ] || { echo "== $g GPUs: skipped ($avail visible)"; continue; }
  devs=$(seq -s, 0 $((g - 1)))
  export CUDA_VISIBLE_DEVICES=$devs
  echo "== $g GPU(s), CUDA_VISIBLE_DEVICES=$devs: engine level"
  : >"$OUT/engine_$g.md"
  first=1
  for strategy in "${EXPLAIN[@]}"; do
    # Predict once (with the first explain strategy); the slower explain strategies run once.
    if [ $first = 1 ]; then p=$ROWS_N reps=3; else p=0 reps=1; fi
    run grove_scaling_bench --model "$MODEL" --rows "$ROWS" --explain-rows "$ROWS_N" \
        --predict-rows "$p" --explain-strategy "$strategy" --predict-strategy auto --reps "$reps" \
        --bandwidth-mb 0 | tee -a "$OUT/engine_$g.md"
    first=0
  done
  # Prediction from rows and results registered once (DMA without staging), then the host's
  # memory and DMA limits that bound N GPUs' staging.
  run grove_scaling_bench --model "$MODEL" --rows "$ROWS" --explain-rows 0 \
      --predict-rows "$ROWS_N" --predict-strategy auto --reps 3 --registered |
      tee -a "$OUT/engine_$g.md"
  echo "== $g GPU(s): through groved"
  repo=$(mktemp -d)
  mkdir -p "$repo/$NAME/1"
  cp "$MODEL" "$repo/$NAME/1/model.${MODEL##*.}"
  cp "$OUT/config.json" "$repo/$NAME/config.json"
  # Not through run(): $! must be groved itself (the bundle runner execs it), not a subshell.
  ${RUN:+"$RUN"} groved --model_repository="$repo" --grpc_port=0 --metrics_port=-1 --http_port=-1 \
      --port_file="$repo/ports.json" --repository_poll_seconds=0 \
      --calibration_cache_dir="$OUT/calibration" --log_level=warning &
  pid=$!
  for _ in $(seq 1 240); do [ -s "$repo/ports.json" ] && break; sleep 0.5; done
  port=$(sed -n 's/.*"grpc_port":\([0-9]*\).*/\1/p' "$repo/ports.json")
  if [ -z "$port" ]; then
    echo "groved did not start"; kill "$pid" 2>/dev/null; continue
  fi
  run grove bench --server "localhost:$port" --model "$NAME" --operation explain \
      --input "$ROWS" --rows-per-request 16384 --concurrency 32 --connections 4 \
      --duration ${GROVE_SCALING_SECONDS:-8} --warmup 2 | tee "$OUT/groved_explain_$g.txt"
  run grove bench --server "localhost:$port" --model "$NAME" --operation predict \
      --kind margin --input "$ROWS" --rows-per-request 131072 --concurrency 16 --connections 4 \
      --duration ${GROVE_SCALING_SECONDS:-8} --warmup 2 | tee "$OUT/groved_predict_$g.txt"
  kill -TERM "$pid"; wait "$pid" 2>/dev/null; pid=""
  rm -rf "$repo"
done
unset CUDA_VISIBLE_DEVICES

# The same answers on every GPU count: one output hash per (op, strategy) across the engine tables
# (the prediction selector may pick different kernels for different GPU counts; each is compared
# with itself).
status=0
# A run with the caller's memory registered (--registered) answers as the staged runs do.
rows=$(cat "$OUT"/engine_*.md | awk -F'|' '{ op=$2; st=$5; h=$9; gsub(/ /, "", op); gsub(/ /, "", st);
    gsub(/\(registered\)/, "", op); gsub(/ /, "", h);
    if ((op == "shap" || op == "predict") && length(h) == 16) print op "/" st, h }')
for pair in $(echo "$rows" | awk '{print $1}' | sort -u); do
  hashes=$(echo "$rows" | awk -v k="$pair" '$1 == k {print $2}' | sort -u)
  runs=$(echo "$rows" | awk -v k="$pair" '$1 == k' | wc -l)
  if [ "$(echo "$hashes" | wc -l)" -gt 1 ]; then
    echo "MISMATCH: $pair answers differ across GPU counts:" $hashes; status=1
  else
    echo "same answers in $runs run(s): $pair ($hashes)"
  fi
done
exit $status

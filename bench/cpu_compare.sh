#!/usr/bin/env bash
# CPU prediction and SHAP against the libraries: for every model,
# Grove's CPU benches, XGBoost's CPU build, nvForest's CPU path, LightGBM (LightGBM models) and
# oneDAL (daal4py) on the same rows, the same sizes and the same thread count, each system in a
# process of its own and a timeout; then the side-by-side tables
# (bench/common/cpu_compare_table.py).
#
# usage: bench/cpu_compare.sh RUNNER ANCHORS_DIR OUT_DIR THREADS BATCHES MODEL:ROWS.csv [...]
#   RUNNER       command prefix running Grove binaries by name ("" or a bundle's DIR/run)
#   ANCHORS_DIR  folder with xgboost-cpu/ and nvforest/ (../shared/anchors, or a carried copy)
#   THREADS      threads of every system: grove_predict_bench --threads THREADS - 1 (its pool's
#                workers; the calling thread also takes chunks), grove_model_bench --threads
#                THREADS (it counts the calling thread, as `grove --threads`), nthread,
#                num_threads, daalinit, OMP_NUM_THREADS (nvForest)
#   BATCHES      prediction sizes, e.g. 1000,100000,1000000
#   MODEL:ROWS   a model (.ubj/.json: XGBoost, .txt: LightGBM) and its rows (.csv or .csv.gz; a
#                trailing label column is dropped): every system gets the first 10,000 rows; the
#                model is named by its file (by its folder when the file is model.*)
# Environment: GROVE_WHEELS (default: the checkout's .whl, filled by
#   bench/common/fetch_cpu_wheels.sh: lightgbm-*.whl, onedal-site.tar.xz), used where Python lacks
#   the package; GROVE_COMPARE_BUDGET (seconds per prediction size, 0.5); GROVE_COMPARE_SHAP_ROWS
#   (5000), GROVE_COMPARE_INTERACTION_ROWS (200), GROVE_COMPARE_SHAP_BUDGET (2);
#   GROVE_COMPARE_TIMEOUT (seconds per system and model, 300); PYTHON (python3);
#   GROVE_COMPARE_COMMIT (the commit the table names; default the checkout's HEAD, which is not
#   the binaries' commit where RUNNER is a bundle built elsewhere).
# XGBoost: ANCHORS_DIR's xgboost-cpu wheel (installed past its Python 3.12 floor: it imports and
# runs on 3.11, the development box's), else the installed one; the table names the versions that
# ran. A system that cannot run or fails is
# shown as such; it never stops the others.
# Writes OUT_DIR/rows/NAME.csv, OUT_DIR/NAME.SYSTEM.{txt,err,status}, OUT_DIR/run.txt and
# OUT_DIR/table.md (also printed).
set -uo pipefail
[ $# -ge 6 ] || { sed -n '8,16p' "$0" >&2; exit 2; }
RUN=$1 ANCHORS=$2 OUT=$3 THREADS=$4 BATCHES=$5
shift 5
HERE=$(cd "$(dirname "$0")" && pwd)
WHEELS=${GROVE_WHEELS:-$HERE/../.whl}
BUDGET=${GROVE_COMPARE_BUDGET:-0.5}
SHAP_ROWS=${GROVE_COMPARE_SHAP_ROWS:-5000}
INTERACTION_ROWS=${GROVE_COMPARE_INTERACTION_ROWS:-200}
SHAP_BUDGET=${GROVE_COMPARE_SHAP_BUDGET:-2}
TIMEOUT=${GROVE_COMPARE_TIMEOUT:-300}
PY=${PYTHON:-python3}
# grove_predict_bench's pool has this many workers and the calling thread works too: THREADS in
# all. grove_model_bench's --threads is the total already.
GROVE_WORKERS=$(( THREADS > 1 ? THREADS - 1 : 1 ))
PP=${PYTHONPATH:+:$PYTHONPATH}  # kept behind each system's own sites
mkdir -p "$OUT/rows"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cpu-compare.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=$THREADS

# SITE: XGBoost's CPU build and the wheels Python lacks.
SITE=$WORK/site
pip_install() {
  PIP_ROOT_USER_ACTION=ignore "$PY" -m pip install -q --no-index --no-deps --no-compile \
    --ignore-requires-python --target "$SITE" "$@"
}
if ls "$ANCHORS"/xgboost-cpu/xgboost_cpu-*.whl >/dev/null 2>&1; then
  pip_install "$ANCHORS"/xgboost-cpu/xgboost_cpu-*.whl || echo "xgboost-cpu wheel: not installed"
  if ! PYTHONPATH="$SITE" "$PY" -c 'import xgboost' 2>/dev/null; then
    echo "xgboost-cpu wheel: does not import here; the installed XGBoost runs"
    rm -rf "$SITE"/xgboost "$SITE"/xgboost_cpu-*
  fi
fi
if ! "$PY" -c 'import lightgbm' 2>/dev/null && ls "$WHEELS"/lightgbm-*.whl >/dev/null 2>&1; then
  pip_install "$WHEELS"/lightgbm-*.whl || echo "lightgbm wheel: not installed"
fi
ONEDAL_ENV=()  # how daal4py runs: Python's own, or the unpacked site; empty: it cannot
if "$PY" -c 'import daal4py' 2>/dev/null; then
  ONEDAL_ENV=(PYTHONPATH="$SITE$PP")
elif [ -f "$WHEELS/onedal-site.tar.xz" ]; then
  mkdir -p "$WORK/onedal" && tar -C "$WORK/onedal" -xJf "$WHEELS/onedal-site.tar.xz"
  ONEDAL_ENV=(PYTHONPATH="$WORK/onedal:$SITE$PP"
              LD_LIBRARY_PATH="$WORK/onedal${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
fi
NVF_SITE=${TMPDIR:-/tmp}/nvf-site  # shared with bench/nvforest_compare.sh
if [ ! -d "$NVF_SITE/nvforest" ] && [ -f "$ANCHORS/nvforest/nvforest-site.tar.xz" ]; then
  mkdir -p "$NVF_SITE" && tar -C "$NVF_SITE" -xJf "$ANCHORS/nvforest/nvforest-site.tar.xz"
fi

{
  echo "threads: $THREADS"
  echo "host: $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "commit: ${GROVE_COMPARE_COMMIT:-$(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "batches: $BATCHES"
  echo "budget: $BUDGET"
  echo "shap_rows: $SHAP_ROWS"
  echo "interaction_rows: $INTERACTION_ROWS"
  echo "nvforest: $(PYTHONPATH=$NVF_SITE$PP "$PY" -c \
    'from importlib.metadata import version; print(version("nvforest-cu13"))' 2>/dev/null)"
} >"$OUT/run.txt"

# run SYSTEM NAME COMMAND...: COMMAND's output in OUT/NAME.SYSTEM.{txt,err}, its outcome in .status
# (not run: it could not start, a module or program missing; failed: it started and broke).
run() {
  local base=$OUT/$2.$1
  shift 2
  echo "  $(basename "$base")"
  timeout "$TIMEOUT" "$@" >"$base.txt" 2>"$base.err"
  local rc=$? why
  why=$(grep -v '^\s*$' "$base.err" | tail -1 | cut -c1-200)
  if [ $rc = 0 ]; then
    echo ok
  elif [ $rc = 124 ]; then
    echo "failed: timed out after $TIMEOUT s"
  elif [ $rc = 127 ] || grep -qE 'ModuleNotFoundError|ImportError|OSError: .*\.so' "$base.err"; then
    echo "not run: $why"
  else
    echo "failed: exit $rc: $why"
  fi >"$base.status"
}
skip() { echo "$3" >"$OUT/$2.$1.status"; : >"$OUT/$2.$1.txt"; }

ANCHOR=$HERE/common/cpu_anchor_bench.py
for pair in "$@"; do
  model=${pair%%:*} rows=${pair#*:}
  name=$(basename "${model%.*}")
  [ "$name" = model ] && name=$(basename "$(dirname "$model")")  # the corpus's CASE/model.txt
  echo "== $name"
  case $model in *.txt) kind=lightgbm ;; *) kind=xgboost ;; esac
  echo "model: $name $kind $model" >>"$OUT/run.txt"
  case $rows in *.gz) zcat -- "$rows" ;; *) cat -- "$rows" ;; esac 2>/dev/null |
    head -n 10000 >"$OUT/rows/$name.csv"
  r=$OUT/rows/$name.csv
  run grove_predict "$name" $RUN grove_predict_bench --model "$model" --rows "$r" --mode cpu \
    --batches "$BATCHES" --threads "$GROVE_WORKERS" --name "$name" --budget "$BUDGET"
  run grove_shap "$name" $RUN grove_model_bench --model "$model" --rows "$r" --threads "$THREADS" \
    --load-repeats 1 --predict-rows 0 --explain-rows "$SHAP_ROWS" \
    --interaction-rows "$INTERACTION_ROWS" --budget "$SHAP_BUDGET"
  args=("$model" "$r" "$name" --threads "$THREADS" --batches "$BATCHES" --budget "$BUDGET"
        --shap-rows "$SHAP_ROWS" --interaction-rows "$INTERACTION_ROWS"
        --shap-budget "$SHAP_BUDGET")
  for lib in xgboost lightgbm; do
    if [ $lib = $kind ]; then
      run $lib "$name" env PYTHONPATH="$SITE$PP" "$PY" "$ANCHOR" $lib "${args[@]}"
    else
      skip $lib "$name" "n/a: not a $lib model"
    fi
  done
  if [ ${#ONEDAL_ENV[@]} -gt 0 ]; then
    run onedal "$name" env "${ONEDAL_ENV[@]}" "$PY" "$ANCHOR" onedal "${args[@]}"
  else
    skip onedal "$name" "not run: no daal4py (bench/common/fetch_cpu_wheels.sh makes it)"
  fi
  if [ -f "$ANCHORS/nvforest/nvforest_bench.py" ]; then
    run nvforest "$name" env PYTHONPATH="$NVF_SITE$PP" "$PY" "$ANCHORS/nvforest/nvforest_bench.py" \
      "$model" "$r" "$name" --device cpu --batches "$BATCHES" --budget "$BUDGET"
  else
    skip nvforest "$name" "not run: no $ANCHORS/nvforest/nvforest_bench.py"
  fi
done
"$PY" "$HERE/common/cpu_compare_table.py" "$OUT" | tee "$OUT/table.md"

#!/usr/bin/env bash
# Overload test of groved: for each operation, the closed-loop capacity (grove bench
# --concurrency), then open loop at 2x and 4x that rate with a 0.5 s deadline. Reports goodput,
# p99 of the OK calls, RESOURCE_EXHAUSTED (shed) count and p99 latency, DEADLINE_EXCEEDED count and
# groved's RSS as one markdown table ($OUT_DIR/overload.md, raw JSON next to it).
#
# Usage (from anywhere; relative paths are relative to the repository root):
#   bench/overload.sh
#   D=30 OUT_DIR=/tmp/ovl GROVED_FLAGS="--compute_threads=2" bench/overload.sh
#
# Environment (defaults in brackets):
#   GROVED        groved binary [build/cpu/bin/groved]
#   GROVE         grove CLI, with offered_per_second / failure_latency_ms [build/cpu/bin/grove]
#   MODEL         model file (.json/.ubj/.txt), or a bench-models statistics .json naming it
#                 [../shared/bench-models/adult-med.json -> adult-med.ubj]
#   DATA          CSV rows (.csv or .csv.gz, no header) [../shared/datasets/adult.csv.gz]
#   LABEL_INDEX   column of DATA to drop; default: label_index of DATA's .json sidecar, else none
#   ROWS          rows of DATA used (cycled by grove bench) [10000]
#   OPS           operation:rows_per_request list ["explain:16 predict:1"]
#   D, WARMUP     measured and warm-up seconds of every run [10, 2]
#   CONCURRENCY   callers of the closed-loop capacity run [16]
#   LOADS         open-loop rates as multiples of capacity ["2 4"]
#   DEADLINE      open-loop request deadline, seconds [0.5]
#   CONNECTIONS   gRPC connections of every bench run [1]
#   CONFIG_JSON   file copied to the model's config.json [none: defaults]
#   GROVED_FLAGS  extra groved flags [none]
#   OUT_DIR       results [out/overload-<date>]
set -euo pipefail
cd "$(dirname "$0")/.."

GROVED=${GROVED:-build/cpu/bin/groved}
GROVE=${GROVE:-build/cpu/bin/grove}
MODEL=${MODEL:-../shared/bench-models/adult-med.json}
DATA=${DATA:-../shared/datasets/adult.csv.gz}
LABEL_INDEX=${LABEL_INDEX:-}
ROWS=${ROWS:-10000}
OPS=${OPS:-"explain:16 predict:1"}
D=${D:-10}
WARMUP=${WARMUP:-2}
CONCURRENCY=${CONCURRENCY:-16}
LOADS=${LOADS:-"2 4"}
DEADLINE=${DEADLINE:-0.5}
CONNECTIONS=${CONNECTIONS:-1}
CONFIG_JSON=${CONFIG_JSON:-}
GROVED_FLAGS=${GROVED_FLAGS:-}
OUT_DIR=${OUT_DIR:-out/overload-$(date +%Y%m%d-%H%M%S)}

die() { echo "overload.sh: $*" >&2; exit 1; }
[ -x "$GROVED" ] || die "no groved at $GROVED (set GROVED=)"
[ -x "$GROVE" ] || die "no grove at $GROVE (set GROVE=)"
mkdir -p "$OUT_DIR"
TMP=$(mktemp -d)
GROVED_PID=
cleanup() {
  if [ -n "$GROVED_PID" ] && kill -0 "$GROVED_PID" 2>/dev/null; then
    kill "$GROVED_PID" 2>/dev/null || true
    wait "$GROVED_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A bench-models statistics file names its model file ("file"); a model has "learner".
MODEL=$(python3 - "$MODEL" <<'EOF'
import json, os, sys
path = sys.argv[1]
if path.endswith(".json"):
    with open(path) as f:
        d = json.load(f)
    if "learner" not in d and "file" in d:
        path = os.path.join(os.path.dirname(path), d["file"])
print(path)
EOF
)
[ -f "$MODEL" ] || die "no model file $MODEL"
NAME=$(basename "${MODEL%.*}")
FEATURES=$("$GROVE" inspect --model "$MODEL" --json --no-gpu |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["features"])')

# Repository: <repo>/<name>/1/model.<ext> (+ config.json).
REPO=$TMP/repo
mkdir -p "$REPO/$NAME/1"
cp "$MODEL" "$REPO/$NAME/1/model.${MODEL##*.}"
[ -z "$CONFIG_JSON" ] || cp "$CONFIG_JSON" "$REPO/$NAME/config.json"

# Rows: the first ROWS rows of DATA without the label column, checked against the model.
python3 - "$DATA" "$LABEL_INDEX" "$ROWS" "$FEATURES" "$TMP/rows.csv" <<'EOF'
import gzip, json, os, sys
data, label, rows, features, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
if label == "":
    sidecar = data[:-3] if data.endswith(".gz") else data
    sidecar = os.path.splitext(sidecar)[0] + ".json"
    label = json.load(open(sidecar)).get("label_index", -1) if os.path.exists(sidecar) else -1
label = int(label)
n = 0
with (gzip.open(data, "rt") if data.endswith(".gz") else open(data)) as f, open(out, "w") as w:
    for line in f:
        fields = line.rstrip("\r\n").split(",")
        if label >= 0:
            del fields[label]
        if len(fields) != features:
            sys.exit(f"{data}: {len(fields)} columns after dropping column {label}, model has {features}")
        w.write(",".join(fields) + "\n")
        n += 1
        if n == rows:
            break
if n == 0:
    sys.exit(f"{data}: no rows")
EOF

# groved on ephemeral loopback ports, written to a port file once bound and loaded.
# shellcheck disable=SC2086
"$GROVED" --model_repository="$REPO" --grpc_address=127.0.0.1 --grpc_port=0 --http_port=-1 \
  --metrics_address=127.0.0.1 --metrics_port=0 --port_file="$TMP/ports.json" \
  --repository_poll_seconds=0 $GROVED_FLAGS >"$OUT_DIR/groved.log" 2>&1 &
GROVED_PID=$!
for _ in $(seq 600); do
  [ -s "$TMP/ports.json" ] && break
  kill -0 "$GROVED_PID" 2>/dev/null || die "groved exited; see $OUT_DIR/groved.log"
  sleep 0.1
done
[ -s "$TMP/ports.json" ] || die "groved did not write its port file in 60 s"
PORT=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["grpc_port"])' \
  "$TMP/ports.json")
SERVER=127.0.0.1:$PORT
MPORT=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["metrics_port"])' \
  "$TMP/ports.json")
# scrape OUT: groved's grove_* series (counters are cumulative over the runs).
scrape() {
  python3 -c 'import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1]).read().decode()
sys.stdout.write("".join(l + "\n" for l in text.splitlines() if l.startswith("grove_")))' \
    "http://127.0.0.1:$MPORT/metrics" >"$1" 2>/dev/null || true
}

alive() { kill -0 "$GROVED_PID" 2>/dev/null || die "groved died; see $OUT_DIR/groved.log"; }
# VmRSS and VmHWM of groved, MiB.
mem() {
  awk '/^VmRSS|^VmHWM/ {v[$1] = $2} END {printf "%.0f %.0f", v["VmRSS:"] / 1024, v["VmHWM:"] / 1024}' \
    "/proc/$GROVED_PID/status"
}
# bench OUT ARGS...: one grove bench run, JSON to OUT (exit code 1 just means failed calls).
bench() {
  local out=$1
  shift
  "$GROVE" bench --server "$SERVER" --model "$NAME" --input "$TMP/rows.csv" --duration "$D" \
    --warmup "$WARMUP" --connections "$CONNECTIONS" --json "$@" >"$out" 2>"${out%.json}.err" ||
    true
  python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$out" 2>/dev/null ||
    die "grove bench wrote no JSON: $(cat "${out%.json}.err")"
}
json_get() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$@"; }

alive
read -r RSS0 _ <<<"$(mem)"
RUNS=$TMP/runs.tsv
: >"$RUNS"
for spec in $OPS; do
  op=${spec%%:*}
  rpr=${spec#*:}
  cap_json=$OUT_DIR/$op-capacity.json
  echo "== $op, $rpr rows/request: closed loop, $CONCURRENCY callers, ${D} s" >&2
  bench "$cap_json" --operation "$op" --rows-per-request "$rpr" --concurrency "$CONCURRENCY" \
    --timeout 30
  alive
  scrape "${cap_json%.json}.metrics"
  read -r rss hwm <<<"$(mem)"
  cap=$(json_get "$cap_json" requests_per_second)
  printf '%s\t%s\tclosed c=%s\t%s\t%s\t%s\t%s\n' "$op" "$rpr" "$CONCURRENCY" "$cap_json" "$cap" \
    "$rss" "$hwm" >>"$RUNS"
  for load in $LOADS; do
    rate=$(python3 -c "print(f'{$load * $cap:.6g}')")
    out=$OUT_DIR/$op-${load}x.json
    echo "== $op: open loop at ${load}x = $rate requests/s, deadline $DEADLINE s, ${D} s" >&2
    bench "$out" --operation "$op" --rows-per-request "$rpr" --rate "$rate" --timeout "$DEADLINE"
    alive
    scrape "${out%.json}.metrics"
    read -r rss hwm <<<"$(mem)"
    printf '%s\t%s\t%sx\t%s\t%s\t%s\t%s\n' "$op" "$rpr" "$load" "$out" "$cap" "$rss" "$hwm" \
      >>"$RUNS"
  done
done

python3 - "$RUNS" "$RSS0" "$NAME" "$GROVED" "$D" "$DEADLINE" >"$OUT_DIR/overload.md" <<'EOF'
import json, sys
runs, rss0, name, groved, d, deadline = sys.argv[1:]
def f(v, spec=".1f"):
    return "-" if v is None else format(v, spec)
print(f"groved {groved}, model {name}, {d} s per run, open-loop deadline {deadline} s, "
      f"RSS after load {rss0} MiB\n")
print("| operation | rows/request | load | offered req/s | goodput req/s | goodput % of capacity "
      "| p99 OK ms | shed count | shed p99 ms | expired count | RSS MiB (end / peak) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
notes = []
for line in open(runs):
    op, rpr, load, path, cap, rss, hwm = line.rstrip("\n").split("\t")
    r = json.load(open(path))
    cap = float(cap)
    failures = r.get("failures", {})
    shed_lat = r.get("failure_latency_ms", {}).get("RESOURCE_EXHAUSTED", {})
    offered = r.get("offered_per_second")
    if offered is None:  # a grove without offered_per_second
        offered = r["requests_per_second"] + r["requests_failed"] / r["duration_seconds"]
    good = r["requests_per_second"]
    print(f"| {op} | {rpr} | {load} | {f(offered)} | {f(good)} | {f(100 * good / cap if cap else None, '.0f')} "
          f"| {f(r['latency_ms']['p99'], '.2f')} | {failures.get('RESOURCE_EXHAUSTED', 0)} "
          f"| {f(shed_lat.get('p99'), '.2f')} | {failures.get('DEADLINE_EXCEEDED', 0)} | {rss} / {hwm} |")
    other = {k: v for k, v in failures.items() if k not in ("RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED")}
    if other:
        notes.append(f"{op} {load}: other failures {other}")
for n in notes:
    print(f"\n{n}")
EOF
cat "$OUT_DIR/overload.md"
echo "results in $OUT_DIR" >&2

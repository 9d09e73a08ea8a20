#!/usr/bin/env bash
# Builds the libFuzzer targets (preset `fuzz`: clang, ASan+UBSan) and runs each one for a bounded
# time, seeded with the corpus model files of its format, or with its own seeds for targets that
# read other files (tests/fuzz/CMakeLists.txt).
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]     (default: $GROVE_FUZZ_SECONDS or 60)
#   GROVE_FUZZ_BUILD_DIR  build directory (default build/fuzz, the preset's)
#   GROVE_FUZZ_JOBS       parallel build jobs (default: all cores)
#   GROVE_FUZZ_PARALLEL   targets fuzzed at once, one core each (default: the cores, at most 4:
#                         each target may hold 2 GB); every target still runs its full time
# Exit status: non-zero when a target fails to build or a fuzzer finds a crash, a leak, a
# sanitizer report or a timeout; the reproducer is left in $BUILD/fuzz-artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=${1:-${GROVE_FUZZ_SECONDS:-60}}
BUILD=${GROVE_FUZZ_BUILD_DIR:-build/fuzz}
JOBS=${GROVE_FUZZ_JOBS:-$(nproc)}
PARALLEL=${GROVE_FUZZ_PARALLEL:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}

if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz.sh: clang++ not found (scripts/install-deps.sh installs it)" >&2
  exit 1
fi

cmake --preset fuzz -B "$BUILD" >/dev/null
cmake --build "$BUILD" -j "$JOBS"

mapfile -t targets < <(find "$BUILD/tests/fuzz" -maxdepth 1 -type f -name 'grove_*_fuzz' -perm -u+x | sort)
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz.sh: no fuzz targets (tests/fuzz/*_fuzz.cc) were built" >&2
  exit 1
fi

mkdir -p "$BUILD/fuzz-artifacts" "$BUILD/fuzz-corpus"
# One target's run: its log and its exit status in fuzz-artifacts (read back below, in order).
fuzz_one() {
  local bin=$1 name seeds corpus max_len
  name=$(basename "$bin")
  seeds="$BUILD/tests/fuzz/${name}_seeds"
  corpus="$BUILD/fuzz-corpus/$name"  # new interesting inputs accumulate here between runs
  mkdir -p "$corpus" "$seeds"
  # -max_len: the largest seed (up to 256 KiB) so that whole models can be mutated.
  max_len=$(find "$seeds" "$corpus" -type f -printf '%s\n' | sort -n | tail -1)
  max_len=${max_len:-4096}
  [ "$max_len" -lt 4096 ] && max_len=4096
  local status=0
  "$bin" -max_total_time="$SECONDS_PER_TARGET" -max_len="$max_len" -timeout=20 \
      -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 \
      -artifact_prefix="$BUILD/fuzz-artifacts/$name-" "$corpus" "$seeds" \
      >"$BUILD/fuzz-artifacts/$name.log" 2>&1 || status=$?
  echo "$status" >"$BUILD/fuzz-artifacts/$name.status"
}

echo "fuzz.sh: ${#targets[@]} targets, ${SECONDS_PER_TARGET}s each, $PARALLEL at a time"
running=0
for bin in "${targets[@]}"; do
  name=$(basename "$bin")
  echo "== $name: $(find "$BUILD/tests/fuzz/${name}_seeds" -type f 2>/dev/null | wc -l) seeds"
  rm -f "$BUILD/fuzz-artifacts/$name.status"
  fuzz_one "$bin" &
  running=$((running + 1))
  if [ "$running" -ge "$PARALLEL" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

failed=()
for bin in "${targets[@]}"; do
  name=$(basename "$bin")
  status=$(cat "$BUILD/fuzz-artifacts/$name.status" 2>/dev/null || echo missing)
  if [ "$status" != 0 ]; then
    echo "fuzz.sh: $name FAILED (status $status); log $BUILD/fuzz-artifacts/$name.log:" >&2
    grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$BUILD/fuzz-artifacts/$name.log" \
      | head -20 >&2 || tail -30 "$BUILD/fuzz-artifacts/$name.log" >&2
    failed+=("$name")
  else
    echo -n "$name: "
    grep -E "stat::number_of_executed_units|stat::new_units_added" \
      "$BUILD/fuzz-artifacts/$name.log" | tr '\n' ' ' || true
    echo
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: failures: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: ${#targets[@]} targets ran ${SECONDS_PER_TARGET}s each without findings"

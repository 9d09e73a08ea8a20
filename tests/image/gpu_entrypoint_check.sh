#!/usr/bin/env bash
# The GPU image's groved on a GPU machine that has no container runtime (the device tool's H100):
# its programs, taken out of the built image, started through the image's entry point with the gpu
# overlay's environment (deploy/k8s/base + overlays/gpu; paths under a scratch folder), then: SERVING
# (grove_server_ready 1 on /metrics), a Predict and an Explain through `grove --server` equal to the
# local CLI's answers on the same machine, batches on the GPU (/metrics device="gpu"), and the SIGTERM
# drain ending with exit code 0. Prepared here after `ctest -L image` (which leaves the GPU image's
# files in build/cpu/tests/image/work/cuda-image-files):
#   F=build/cpu/tests/image/work/cuda-image-files
#   /work/shared/tools/bundle-for-device .device/img19 $F/groved $F/grove
#   cp $F/groved-entrypoint.sh $F/libcudart.so.* .device/img19/
#   device run (carry .device/img19): tests/image/gpu_entrypoint_check.sh .device/img19
# Results: stdout, and $OUT/gpu-image-check.tar.gz (groved's log, /metrics, answers).
set -euo pipefail
B=$(cd "$1" && pwd)
R=$(cd "$(dirname "$0")/../.." && pwd)
W=/tmp/grove-gpu-image
# The manifests' ports (GP, MP override them where those are taken).
GP=${GP:-8001} MP=${MP:-8002}
rm -rf "$W"; mkdir -p "$W/models/demo/1" "$W/cache" "$W/etc"
cp "$R/examples/models/demo/1/model.json" "$W/models/demo/1/"
cp "$R/deploy/k8s/base/default_model_config.json" "$W/etc/"
# The image's CUDA runtime first (the image sets LD_LIBRARY_PATH=/opt/grove/lib), then the bundle's
# Debian libraries; the driver is the machine's.
mkdir -p "$W/lib"; cp "$B"/libcudart.so.* "$W/lib/"
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s:%s exec %s "$@"\n' "$W/lib" "$B/lib" "$B/bin/groved" >"$W/groved"
chmod +x "$W/groved"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
env -i PATH=/usr/bin:/bin GROVED="$W/groved" \
  GROVE_MODEL_REPOSITORY="$W/models" GROVE_GRPC_PORT="$GP" GROVE_METRICS_PORT="$MP" \
  GROVE_DEFAULT_MODEL_CONFIG="$W/etc/default_model_config.json" GROVE_STRICT_READINESS=true \
  GROVE_REPOSITORY_POLL_SECONDS=30 GROVE_MODEL_CONTROL=false GROVE_SHUTDOWN_DELAY_SECONDS=5 \
  GROVE_SHUTDOWN_GRACE_SECONDS=30 GROVE_CALIBRATION_CACHE_DIR="$W/cache" GROVE_LOG_FORMAT=json \
  GROVE_LOG_LEVEL=info GROVE_COMPUTE_THREADS=8 GROVE_USE_GPU=true \
  NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility \
  sh "$B/groved-entrypoint.sh" >"$W/groved.log" 2>&1 &
PID=$!
start=$(date +%s.%N)
metrics() { python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$MP/metrics', timeout=5).read().decode())" 2>/dev/null || curl -sf http://127.0.0.1:$MP/metrics; }
ok=0
for _ in $(seq 1 1200); do
  if metrics | grep -q '^grove_server_ready 1'; then ok=1; break; fi
  kill -0 $PID 2>/dev/null || break
  sleep 0.1
done
took=$(python3 -c "import time; print(round(time.time() - $start, 2))" 2>/dev/null || echo '?')
fail=0
if [ $ok = 1 ]; then echo "SERVING (grove_server_ready 1) ${took}s after the entry point started"; else
  echo "FAIL: never ready"; tail -30 "$W/groved.log"; fail=1; fi
G="$B/run grove"
# Values equal to 1e-5 relative: the GPU sums trees and SHAP terms in another order than the CPU.
same() {
  python3 - "$1" "$2" "$3" <<'PY'
import sys
a = [[float(x) for x in l.split(",")] for l in open(sys.argv[1]) if l.strip()]
b = [[float(x) for x in l.split(",")] for l in open(sys.argv[2]) if l.strip()]
bad = [(i, j) for i, (r, s) in enumerate(zip(a, b)) for j, (x, y) in enumerate(zip(r, s))
       if abs(x - y) > 1e-5 * max(1.0, abs(y))]
ok = len(a) == len(b) > 0 and all(len(r) == len(s) for r, s in zip(a, b)) and not bad
print(f"{sys.argv[3]} through groved {'= local CLI' if ok else 'DIFFERS from the local CLI at ' + str(bad[:3])} ({len(a)} rows)")
sys.exit(0 if ok else 1)
PY
}
if [ $fail = 0 ]; then
  # README's rows, and 100,000 random rows of the demo model's 8 features (large enough that the
  # engines choose the GPU).
  python3 -c "
import random; random.seed(1)
print('\n'.join(','.join('%.6g' % random.gauss(0, 1.5) for _ in range(8)) for _ in range(100000)))" >"$W/big.csv"
  for rows in "$R/examples/rows.csv" "$W/big.csv"; do
    n=$(basename "$rows" .csv)
    for op in predict explain; do
      $G $op --server "127.0.0.1:$GP" --model demo --input "$rows" --no-progress >"$W/$op-$n-server.csv"
      $G $op --model "$W/models/demo/1/model.json" --input "$rows" --no-progress >"$W/$op-$n-local.csv"
      same "$W/$op-$n-server.csv" "$W/$op-$n-local.csv" "$op $n" || fail=1
    done
  done
  metrics >"$W/metrics.txt"
  grep -E '^grove_build_info|^grove_batches_total\{' "$W/metrics.txt" | head -8
  grep -qE '^grove_batches_total\{.*device="cuda:0' "$W/metrics.txt" \
    && echo "/metrics: batches ran on cuda:0" || { echo "FAIL: no grove_batches_total with device=cuda:0"; fail=1; }
fi
t0=$(date +%s)
kill -TERM $PID
set +e; wait $PID; rc=$?; set -e
echo "SIGTERM -> exit $rc in $(( $(date +%s) - t0 ))s (delay 5 s, grace 30 s)"
[ $rc = 0 ] || fail=1
tail -3 "$W/groved.log"
[ -n "${OUT:-}" ] && tar czf "$OUT/gpu-image-check.tar.gz" -C "$W" groved.log metrics.txt predict-rows-server.csv explain-rows-server.csv 2>/dev/null || true
[ $fail = 0 ] && echo "gpu image check: passed" || { echo "gpu image check: FAILED"; exit 1; }

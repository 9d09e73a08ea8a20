#!/usr/bin/env bash
# Captures /metrics of a CUDA groved on a GPU machine under `grove bench` load, every second, for
# replay_capture_test.py (tests/deploy/data/<name>-capture.tar.gz). Run through the device tool:
#   cmake -S . -B build/deploy-cuda -G Ninja -DGROVE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
#     -DGROVE_BUILD_BENCH=OFF -DGROVE_BUILD_TESTS=OFF && ninja -C build/deploy-cuda groved grove_cli
#   /work/shared/tools/bundle-for-device .device/deploy6 build/deploy-cuda/bin/groved build/deploy-cuda/bin/grove
#   mkdir -p .device/deploy6/models/{adult,housing,regression}/1
#   cp /work/shared/bench-models/adult-med.ubj .device/deploy6/models/adult/1/model.ubj
#   cp /work/shared/bench-models/cal_housing-med.ubj .device/deploy6/models/housing/1/model.ubj
#   cp tests/golden/xgb_regression/model.json .device/deploy6/models/regression/1/model.json
#   cp tests/deploy/capture_gpu_metrics.sh .device/deploy6/run_all.sh
#   device run: .device/deploy6/run_all.sh   (carry .device/deploy6; ~40 s)
# Everything lands in $OUT/gpu-capture.tar.gz (scrapes, bench reports, groved log, nvidia-smi); the
# committed capture keeps scrapes 000-016 and the head and tail of the log.
set -u
D=$(cd "$(dirname "$0")" && pwd)
W=/tmp/grove-capture
rm -rf "$W"; mkdir -p "$W/scrapes"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv > "$W/nvidia-smi.csv" 2>&1
"$D/run" groved --model_repository="$D/models" --grpc_port=0 --metrics_port=0 --grpc_address=127.0.0.1 \
  --metrics_address=127.0.0.1 --port_file="$W/ports.json" --log_format=json > "$W/groved.log" 2>&1 &
PID=$!
for i in $(seq 1 1200); do [ -s "$W/ports.json" ] && break; sleep 0.1; done
cat "$W/ports.json" || { echo "no port file"; tail -20 "$W/groved.log"; exit 1; }
GP=$(sed -E 's/.*"grpc_port":([0-9]+).*/\1/' "$W/ports.json")
MP=$(sed -E 's/.*"metrics_port":([0-9]+).*/\1/' "$W/ports.json")
get() { python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$MP/metrics').read().decode())" 2>/dev/null || curl -s "http://127.0.0.1:$MP/metrics"; }
get > "$W/scrapes/scrape-000.txt"
B() { "$D/run" grove bench --server "127.0.0.1:$GP" --duration 24 --warmup 1 --timeout 5 --json "$@"; }
B --model adult --operation predict --rate 400 --rows-per-request 512 > "$W/bench-adult-predict.json" 2>&1 &
P1=$!
B --model housing --operation explain --rate 100 --rows-per-request 64 > "$W/bench-housing-explain.json" 2>&1 &
P2=$!
B --model regression --operation explain --interactions --rate 50 --rows-per-request 4 > "$W/bench-regression-interactions.json" 2>&1 &
P3=$!
B --model adult --operation predict --concurrency 8 --rows-per-request 1 > "$W/bench-adult-predict-1row.json" 2>&1 &
P4=$!
for i in $(seq -w 1 28); do sleep 1; get > "$W/scrapes/scrape-0$i.txt"; done
wait $P1 $P2 $P3 $P4
kill -TERM $PID; wait $PID; echo "groved exit $?" | tee "$W/groved-exit.txt"
tar czf "$OUT/gpu-capture.tar.gz" -C "$W" .
ls -la "$W" "$W/scrapes" | head -50
cat "$W"/bench-*.json | cut -c1-600
tail -5 "$W/groved.log"

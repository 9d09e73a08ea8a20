#!/usr/bin/env bash
# Installs everything, builds Grove and starts `groved` on the bundled demo model
# (examples/models/demo/1/model.json), in the foreground. Ctrl-C (SIGINT) or SIGTERM drains and stops it.
#   GROVE_PRESET=cuda scripts/demo.sh     build the CUDA engines too (needs the CUDA 13 toolkit)
#   GROVE_GRPC_PORT / GROVE_HTTP_PORT / GROVE_METRICS_PORT  ports (default 8001 / 8000 / 8002), all
#                                                           on localhost only
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=${GROVE_PRESET:-cpu}
GRPC_PORT=${GROVE_GRPC_PORT:-8001}
HTTP_PORT=${GROVE_HTTP_PORT:-8000}
METRICS_PORT=${GROVE_METRICS_PORT:-8002}

scripts/install-deps.sh
scripts/build.sh "$PRESET"
BIN=build/$PRESET/bin

echo
echo "== grove inspect (local, embedded mode)"
"$BIN/grove" inspect --model examples/models/demo/1/model.json
echo
echo "== grove explain, first rows of examples/rows.csv (local, embedded mode)"
head -3 examples/rows.csv > "${TMPDIR:-/tmp}/grove-demo-rows.csv"
"$BIN/grove" explain --model examples/models/demo/1/model.json \
  --input "${TMPDIR:-/tmp}/grove-demo-rows.csv" --output -

cat <<MSG

== starting groved on examples/models: gRPC localhost:$GRPC_PORT, REST http://localhost:$HTTP_PORT,
   metrics http://localhost:$METRICS_PORT/metrics
   In another terminal:
     $BIN/grove predict --server localhost:$GRPC_PORT --model demo --input examples/rows.csv
     $BIN/grove explain --server localhost:$GRPC_PORT --model demo --input examples/rows.csv
     $BIN/grove bench   --server localhost:$GRPC_PORT --model demo --input examples/rows.csv --concurrency 16
     curl -s localhost:$HTTP_PORT/v2/models/demo/ready -o /dev/null -w '%{http_code}\n'
     curl -s localhost:$METRICS_PORT/metrics | grep ^grove_
MSG
exec "$BIN/groved" --model_repository=examples/models --grpc_address=127.0.0.1 --grpc_port="$GRPC_PORT" \
  --http_address=127.0.0.1 --http_port="$HTTP_PORT" --metrics_address=127.0.0.1 --metrics_port="$METRICS_PORT"

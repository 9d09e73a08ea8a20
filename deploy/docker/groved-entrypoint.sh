#!/bin/sh
# Container entry point of groved: turns GROVE_* environment variables into groved flags.
#
# Every flag of docs/operations.md has a variable: GROVE_ followed by the flag's name in upper case
# (GROVE_MODEL_REPOSITORY -> --model_repository, GROVE_GRPC_PORT -> --grpc_port, ...). A variable that
# is unset or empty passes no flag (groved's default applies). Arguments given to the container
# (Kubernetes `args:`, `docker run IMAGE ...`) are appended, so they win over the environment.
# GROVED (default /usr/local/bin/groved) is the binary; tests/deploy runs this script with the
# manifests' environment against a freshly built groved.
set -eu

GROVED=${GROVED:-/usr/local/bin/groved}

# The flags of docs/operations.md, in its order. tests/deploy checks each against `groved --helpfull`.
GROVE_ENV_FLAGS="model_repository grpc_address grpc_port http_address http_port http_threads
http_timeout_seconds http_keep_alive_seconds http_max_json_body_mb metrics_address metrics_port port_file
tls_cert_file tls_key_file tls_client_ca_file auth_token_file tls_client_roles_file auth_poll_seconds
max_message_bytes max_concurrent_streams grpc_threads repository_poll_seconds model_control shared_memory
shared_memory_max_region_mb shared_memory_max_total_mb shared_memory_max_regions strict_readiness
default_model_config use_gpu
compute_threads batch_threads max_queue_wait_ms compute_chunk_ms inline_compute_us max_request_memory_mb host_buffer_mb
compute_priority
calibration_cache_dir
shutdown_delay_seconds shutdown_grace_seconds
log_format log_level"

if [ "${1:-}" = "--print-flags" ]; then
  # Lists the variable -> flag table (used by tests and `docker run IMAGE --print-flags`).
  for flag in $GROVE_ENV_FLAGS; do
    echo "GROVE_$(echo "$flag" | tr '[:lower:]' '[:upper:]') --$flag"
  done
  exit 0
fi

# KServe (deploy/kserve): its storage initializer puts a model at the repository path, either as a
# repository (NAME/VERSION/FILE: served as it is) or as the model file alone. With
# GROVE_KSERVE_MODEL_NAME set (the runtime sets the InferenceService's name) and one model file
# directly in that folder, the file is copied into a repository of one model of that name, version
# 1 (with a background.csv / background.npy / config.json lying beside it), under
# GROVE_KSERVE_REPOSITORY (default /tmp/grove-kserve-repository), which groved then serves. The
# content decides the file's format, whatever its name.
if [ -n "${GROVE_KSERVE_MODEL_NAME:-}" ]; then
  # A model name as groved takes it (the folder is replaced below): letters, digits, '_', '-', '.',
  # not starting with '.'.
  case "$GROVE_KSERVE_MODEL_NAME" in
    .* | *[!A-Za-z0-9_.-]*)
      echo "groved-entrypoint: GROVE_KSERVE_MODEL_NAME '$GROVE_KSERVE_MODEL_NAME' is not a model name" >&2
      exit 2
      ;;
  esac
  src=${GROVE_MODEL_REPOSITORY:-/mnt/models}
  found=""
  count=0
  for candidate in "$src"/*; do
    [ -f "$candidate" ] || continue
    case "${candidate##*/}" in
      config.json | model-settings.json | requirements.txt) ;;
      *.json | *.ubj | *.bst | *.model | *.txt)
        found="$found ${candidate##*/}"
        count=$((count + 1))
        model=$candidate
        ;;
    esac
  done
  if [ "$count" -gt 1 ]; then
    echo "groved-entrypoint: $src holds several model files ($found ); keep one" >&2
    exit 2
  fi
  if [ "$count" -eq 1 ]; then
    case "$model" in
      *.json) file=model.json ;;
      *.ubj) file=model.ubj ;;
      *.txt) file=model.txt ;;
      *) file=xgboost.model ;;
    esac
    repo=${GROVE_KSERVE_REPOSITORY:-/tmp/grove-kserve-repository}
    dir=$repo/$GROVE_KSERVE_MODEL_NAME
    rm -rf "$dir"
    mkdir -p "$dir/1"
    cp "$model" "$dir/1/$file"
    for extra in background.csv background.npy config.json; do
      if [ -f "$src/$extra" ]; then cp "$src/$extra" "$dir/$extra"; fi
    done
    GROVE_MODEL_REPOSITORY=$repo
    echo "groved-entrypoint: serving ${model##*/} as model '$GROVE_KSERVE_MODEL_NAME' from $repo" >&2
  fi
fi

# Build "$@" = flags from the environment, then the container's arguments.
n_args=$#
for flag in $GROVE_ENV_FLAGS; do
  var="GROVE_$(echo "$flag" | tr '[:lower:]' '[:upper:]')"
  eval "value=\${$var:-}"
  if [ -n "$value" ]; then
    set -- "$@" "--$flag=$value"
  fi
done
# Rotate the original arguments behind the environment's flags.
i=0
while [ "$i" -lt "$n_args" ]; do
  arg=$1
  shift
  set -- "$@" "$arg"
  i=$((i + 1))
done

exec "$GROVED" "$@"

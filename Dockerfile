# syntax=docker/dockerfile:1.6
# Container image of groved, Grove's gRPC and REST prediction/SHAP server. See docs/deploy.md.
#
#   docker build -t grove:cuda .                                  # CUDA 13 engines (sm_90, H100)
#   docker build -t grove:cpu --build-arg GROVE_DEVICE=cpu .      # CPU only, for clusters without GPUs
#   docker build -t grove:cuda-demo --build-context models=/path/to/repository .   # models baked in
#   docker build -t grove:cuda --build-context cuda=/usr/local/cuda-13.0 .   # a CUDA toolkit of yours
#
# The build stage runs README's steps: scripts/install-deps.sh (here --build-only: the Debian 12
# packages that building needs, no test tools) and scripts/build.sh <preset> (the CMake preset `cuda`
# or `cpu`), on the same Debian 12 the project is developed and tested on. NVIDIA publishes no
# Debian-based CUDA images, so the CUDA 13.0 toolkit comes from NVIDIA's Debian 12 apt repository
# instead of an nvidia/cuda:*-devel base image, or from a toolkit directory given as the `cuda` build
# context (hosts that cannot reach NVIDIA's repository: CI builds it so). The runtime stage is
# debian:bookworm-slim plus only the Debian packages owning the shared libraries groved loads
# (deploy/docker/runtime-deps.sh: ldd + dpkg -S) and the CUDA runtime library copied from the build
# stage; the GPU driver (libcuda.so.1) is mounted by the NVIDIA container toolkit.
# Base images are build arguments (BUILD_IMAGE, RUNTIME_IMAGE): CI builds without a registry from a
# Debian 12 base made with debootstrap (deploy/docker/make-base-image.sh). tests/image builds both
# variants with podman and runs the CPU image as the manifests do; tests/deploy checks that these
# steps and the entry point's flags match README, scripts/ and `groved --helpfull`.

ARG DEBIAN_RELEASE=bookworm
# Base images of the two stages (Debian 12 both: the build stage's libraries are the runtime's).
ARG BUILD_IMAGE=debian:${DEBIAN_RELEASE}
ARG RUNTIME_IMAGE=debian:${DEBIAN_RELEASE}-slim
# cuda: build with the `cuda` preset (needs the CUDA toolkit, installed below); cpu: the `cpu` preset.
ARG GROVE_DEVICE=cuda

# ---------------------------------------------------------------------------------------------------
# Optional model repository to bake into the image: empty unless `--build-context models=DIR` names a
# repository directory (layout in docs/operations.md). Without it, mount a repository at /models.
FROM scratch AS models

# Optional CUDA 13 toolkit: empty unless `--build-context cuda=DIR` names a toolkit directory (one
# with bin/nvcc, include/ and lib/ or lib64/, e.g. /usr/local/cuda-13.0); then NVIDIA's apt
# repository is not used.
FROM scratch AS cuda

# Optional compiler cache: empty unless `--build-context ccache=DIR` names a ccache directory filled by
# builds of this checkout with the same preset (scripts/test.sh does so for tests/image); its hits are
# used read-only (the cache is not changed), and a miss compiles as without it.
FROM scratch AS ccache

# ---------------------------------------------------------------------------------------------------
FROM ${BUILD_IMAGE} AS build
ENV DEBIAN_FRONTEND=noninteractive
SHELL ["/bin/bash", "-euo", "pipefail", "-c"]
WORKDIR /src

# README step 1: dependencies (cached as long as the script does not change; the same layer for both
# variants, so the build arguments come after it).
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN scripts/install-deps.sh --build-only && rm -rf /var/lib/apt/lists/*

ARG GROVE_DEVICE
# NVIDIA's Debian 12 CUDA repository and the toolkit version (the version the project builds with).
ARG CUDA_REPO=https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64
ARG CUDA_PACKAGE_VERSION=13-0
# CUDA 13 toolkit (compiler, runtime and CCCL headers) for the `cuda` preset, unless the `cuda` build
# context gives one (used in place, through a bind mount, below).
RUN --mount=type=bind,from=cuda,target=/opt/cuda-context \
    if [ "$GROVE_DEVICE" = cuda ] && [ -x /opt/cuda-context/bin/nvcc ]; then \
      echo "CUDA toolkit: the cuda build context ($(/opt/cuda-context/bin/nvcc --version | tail -n 2 | head -n 1))"; \
    elif [ "$GROVE_DEVICE" = cuda ]; then \
      apt-get update -q && apt-get install -y -q --no-install-recommends curl ca-certificates && \
      curl -fsSL -o /tmp/cuda-keyring.deb "$CUDA_REPO/cuda-keyring_1.1-1_all.deb" && \
      dpkg -i /tmp/cuda-keyring.deb && rm /tmp/cuda-keyring.deb && \
      apt-get update -q && \
      apt-get install -y -q --no-install-recommends "cuda-minimal-build-$CUDA_PACKAGE_VERSION" && \
      rm -rf /var/lib/apt/lists/*; \
    elif [ "$GROVE_DEVICE" != cpu ]; then \
      echo "GROVE_DEVICE must be cuda or cpu, not '$GROVE_DEVICE'" >&2; exit 1; \
    fi

# Parallel compile jobs (scripts/build.sh reads GROVE_JOBS; default: all cores).
ARG GROVE_JOBS=
ENV GROVE_JOBS=${GROVE_JOBS}
# README step 2: configure and build with the preset, only the programs the image ships (without
# their debug sections: the image carries no debugger).
COPY . .
RUN --mount=type=bind,from=cuda,target=/opt/cuda-context \
    --mount=type=bind,from=ccache,target=/opt/ccache-context \
    if [ -x /opt/cuda-context/bin/nvcc ]; then ln -sfn /opt/cuda-context /usr/local/cuda; fi && \
    if [ -n "$(ls -A /opt/ccache-context)" ]; then \
      export CCACHE_DIR=/opt/ccache-context CCACHE_READONLY=1 CCACHE_TEMPDIR=/tmp/ccache \
             CMAKE_C_COMPILER_LAUNCHER=/src/scripts/ccache-compile \
             CMAKE_CXX_COMPILER_LAUNCHER=/src/scripts/ccache-compile \
             CMAKE_CUDA_COMPILER_LAUNCHER=/src/scripts/ccache-compile; \
    fi && \
    scripts/build.sh "$GROVE_DEVICE" groved grove_cli && \
    deploy/docker/runtime-deps.sh /out "build/$GROVE_DEVICE/bin/groved" "build/$GROVE_DEVICE/bin/grove" && \
    mkdir -p /out/bin && \
    strip --strip-debug -o /out/bin/groved "build/$GROVE_DEVICE/bin/groved" && \
    strip --strip-debug -o /out/bin/grove "build/$GROVE_DEVICE/bin/grove"

# ---------------------------------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE} AS runtime
ARG GROVE_DEVICE
SHELL ["/bin/bash", "-euo", "pipefail", "-c"]

# Only the runtime libraries: the Debian packages that own the libraries groved links.
COPY --from=build /out/packages.txt /tmp/grove-runtime-packages.txt
RUN apt-get update -q && \
    xargs -a /tmp/grove-runtime-packages.txt apt-get install -y -q --no-install-recommends ca-certificates && \
    rm -rf /var/lib/apt/lists/* /tmp/grove-runtime-packages.txt
# Libraries no Debian package provides (the CUDA runtime of a `cuda` build).
COPY --from=build /out/lib/ /opt/grove/lib/
COPY --from=build /out/bin/groved /out/bin/grove /usr/local/bin/
COPY deploy/docker/groved-entrypoint.sh /usr/local/bin/groved-entrypoint.sh

# Unprivileged user; models are read-only to it, the GPU calibration cache is its only writable path.
RUN groupadd --gid 10001 grove && \
    useradd --uid 10001 --gid grove --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin grove && \
    mkdir -p /models /var/cache/grove && chown grove:grove /var/cache/grove
# Baked model repository (empty unless --build-context models=DIR was given), owned by root and
# readable by all. COPY, not a bind mount: podman/buildah's layer cache does not see the contents of
# a mounted build context, and reused the model-less layer for a build with models.
COPY --from=models --chown=0:0 . /models/
RUN find /models \( -type d ! -perm -a+rx \) -o \( -type f ! -perm -a+r \) | xargs -r chmod a+rX

ENV LD_LIBRARY_PATH=/opt/grove/lib \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    GROVE_MODEL_REPOSITORY=/models \
    GROVE_HTTP_PORT=8000 \
    GROVE_GRPC_PORT=8001 \
    GROVE_METRICS_PORT=8002 \
    GROVE_CALIBRATION_CACHE_DIR=/var/cache/grove \
    GROVE_LOG_FORMAT=json

LABEL org.opencontainers.image.title="groved" \
      org.opencontainers.image.description="Grove: tree-ensemble prediction and SHAP over gRPC and REST" \
      org.opencontainers.image.source="https://example.invalid/grove" \
      grove.device="${GROVE_DEVICE}"

USER 10001:10001
# Triton's ports. 8000: KServe v2 REST (tritonclient.http, curl; /v2/health/ready). 8001: gRPC
# (grove.v1.Grove, inference.GRPCInferenceService, grpc.health.v1.Health, reflection); the probes
# use gRPC health on it. 8002: Prometheus metrics (HTTP GET /metrics).
EXPOSE 8000 8001 8002
# Flags come from GROVE_* variables (deploy/docker/groved-entrypoint.sh); arguments are appended.
# groved is PID 1 (exec) and drains on SIGTERM itself (docs/operations.md, Shutdown).
ENTRYPOINT ["/usr/local/bin/groved-entrypoint.sh"]
CMD []

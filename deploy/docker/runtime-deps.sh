#!/bin/sh
# Collects what a Grove binary needs at run time, for the runtime stage of the Dockerfile.
#   deploy/docker/runtime-deps.sh OUTDIR BINARY...
# writes OUTDIR/packages.txt: the Debian packages that own the shared libraries the binaries load
# (from `ldd` + `dpkg -S`; the runtime stage apt-installs exactly these), and copies into OUTDIR/lib
# every library that no Debian package owns or that lives under /usr/local (the CUDA runtime,
# libcudart.so.13, when the binary links it dynamically). The driver's libcuda.so.1 and the C
# library itself are never copied: the NVIDIA container toolkit mounts the driver, the base image
# has libc.
set -eu
out=$1
shift
mkdir -p "$out/lib"
: >"$out/packages.txt.tmp"
for bin in "$@"; do
  if ldd "$bin" | grep -q "not found"; then
    echo "runtime-deps: $bin has unresolved libraries:" >&2
    ldd "$bin" | grep "not found" >&2
    exit 1
  fi
  ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libcuda.so*|libnvidia-*) continue ;;
    esac
    real=$(readlink -f "$lib")
    pkg=""
    case "$real" in
      /usr/local/*) ;;
      *) pkg=$(dpkg -S "$real" 2>/dev/null | head -n1 | cut -d: -f1 || true)
         [ -n "$pkg" ] || pkg=$(dpkg -S "$lib" 2>/dev/null | head -n1 | cut -d: -f1 || true) ;;
    esac
    if [ -n "$pkg" ]; then
      echo "$pkg" >>"$out/packages.txt.tmp"
    else
      cp -L "$lib" "$out/lib/$(basename "$lib")"
    fi
  done
done
sort -u "$out/packages.txt.tmp" >"$out/packages.txt"
rm -f "$out/packages.txt.tmp"
echo "runtime-deps: $(wc -l <"$out/packages.txt") packages, $(ls "$out/lib" | wc -l) copied libraries"

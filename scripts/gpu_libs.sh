#!/usr/bin/env bash
# Sourced on the GPU machine: puts on LD_LIBRARY_PATH the directory of every shared library that
# the given binaries need and the loader can't find (the CUDA 13 runtime and cuBLASLt there come
# with the image's pip packages, not in the loader's default path).
# Libraries the image lacks altogether (ICU 72, which the V4.1 Engram token map links) can be
# carried packed: every .carry/*libs*.tar.xz is unpacked into /tmp/gpu_libs and searched first.
# Usage: source scripts/gpu_libs.sh BINARY...
for _gpu_libs_pack in .carry/*libs*.tar.xz; do
  [ -f "$_gpu_libs_pack" ] || continue
  mkdir -p /tmp/gpu_libs && tar -xJf "$_gpu_libs_pack" -C /tmp/gpu_libs
  export LD_LIBRARY_PATH="/tmp/gpu_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
for _gpu_libs_bin in "$@"; do
  for lib in $(ldd "$_gpu_libs_bin" 2>/dev/null | awk '/not found/ {print $1}'); do
    hit=$(find / -xdev -name "$lib" -not -path '/proc/*' 2>/dev/null | head -1)
    if [ -n "$hit" ]; then
      export LD_LIBRARY_PATH="$(dirname "$hit")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    else
      echo "gpu_libs.sh: $lib (needed by $_gpu_libs_bin) is nowhere on this machine" >&2
    fi
  done
done

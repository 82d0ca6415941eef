#!/usr/bin/env bash
# Here, before a device call: packs what scripts/gpu_next_check.sh needs into .carry/ (kept out of
# git by .git/info/exclude; the working tree plus carry must stay under 64 MiB):
#   .carry/bin.tar.xz        stripped binaries from BUILD_DIR (xz: about a fifth of their size);
#   .carry/gpu_libs.tar.xz   shared libraries the CUDA image lacks (UCX, hiredis, ICU 72, PCRE2,
#                            numa), which scripts/gpu_libs.sh puts on LD_LIBRARY_PATH there;
#   .carry/redis.tar.xz      redis-server behind a wrapper that gives it its own libraries only
#                            (so the image's python keeps its own OpenSSL);
#   .carry/shared/           ../shared's conformance fixtures;
#   .carry/golden_v41.tar.xz ../shared/golden_v41 (unpacked into .carry/shared there).
# Usage: scripts/pack_gpu_carry.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: pack_gpu_carry.sh BUILD_DIR}
cd "$(dirname "$0")/.."
mkdir -p .carry
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
for b in deepinfer bench/pdl_chain_bench; do cp "$build/$b" "$tmp/bin/"; done
for t in cuda_ops_test cuda_batch_invariance_test cuda_model_test cuda_runner_test \
         cuda_engine_test cuda_v41_test prefix_cache_engine_test deterministic_sampling_test \
         speculative_decoding_test dspark_speculative_test engine_test; do
  f=$(find "$build" -name "$t" -type f -perm -u+x | head -1)
  [ -n "$f" ] || { echo "pack_gpu_carry.sh: $t not built in $build" >&2; exit 1; }
  cp "$f" "$tmp/bin/"
done
strip "$tmp"/bin/*
tar -cJf .carry/bin.tar.xz -C "$tmp" bin
libs=(libpcre2-8.so.0 libnuma.so.1 libicudata.so.72 libicuuc.so.72 libuct.so.0 libucp.so.0
      libucm.so.0 libucs.so.0 libhiredis.so.0.14)
mkdir -p "$tmp/libs"
for l in "${libs[@]}"; do cp -L "/lib/x86_64-linux-gnu/$l" "$tmp/libs/"; done
tar -cJf .carry/gpu_libs.tar.xz -C "$tmp/libs" .
mkdir -p "$tmp/redis/lib"
cp -L "$(command -v redis-server)" "$tmp/redis/lib/redis-server"
for l in $(ldd "$(command -v redis-server)" | awk '/=>/ {print $3}'); do
  case "$(basename "$l")" in libc.so.*|libm.so.*) ;; *) cp -L "$l" "$tmp/redis/lib/" ;; esac
done
for l in $(ldd /lib/x86_64-linux-gnu/libsystemd.so.0 | awk '/=>/ {print $3}'); do
  case "$(basename "$l")" in libc.so.*|libm.so.*) ;; *) cp -L "$l" "$tmp/redis/lib/" ;; esac
done
cat > "$tmp/redis/redis-server" <<'WRAP'
#!/bin/sh
here=$(dirname "$0")
LD_LIBRARY_PATH="$here/lib" exec "$here/lib/redis-server" "$@"
WRAP
chmod +x "$tmp/redis/redis-server"
tar -cJf .carry/redis.tar.xz -C "$tmp/redis" .
# The goldens go as one xz tar (6 MB instead of 12), which gpu_next_check.sh unpacks there.
rm -rf .carry/shared && mkdir -p .carry/shared
cp -r ../shared/conformance .carry/shared/
tar -cJf .carry/golden_v41.tar.xz -C ../shared golden_v41
du -sh .carry/*.tar.xz .carry/shared

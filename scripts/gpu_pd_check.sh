#!/usr/bin/env bash
# On the GPU machine (issue 20, acceptance 5): a plain server, a prefill worker and a decode
# worker on one H200 (three processes, v4-flash-8layer), bench/disagg_transfer.sh over them:
# the decode phase's time (fetch, pool write, first token) beside the plain request, the answers
# checked equal, and the transfer rate; once with the state through host memory and loopback
# TCP, once device to device by CUDA IPC handle. Needs .carry/*libs*.tar.xz with
# libucp/libuct/libucs/libucm/libnuma (the binary links UCX). Logs to $OUT (or ./gpu_logs);
# BIN_DIR holds deepinfer.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu_logs}
mkdir -p "$out"
bin=${BIN_DIR:-build}/deepinfer
source scripts/gpu_libs.sh "$bin"
model=${MODEL_DIR:-/tmp/m8}
if [ ! -f "$model/config.json" ]; then
  "$bin" make-tiny-model "$model" --preset v4-flash-8layer \
    --tokenizer assets/tokenizers/deepseek_v3 > "$out/make_m8.log" 2>&1 || exit 1
fi
# Twice: the state through host memory and loopback TCP, then device to device by CUDA IPC
# (--disagg-cuda-ipc: the fetch carries only the header).
rc=0
for mode in ${MODES:-tcp cuda_ipc}; do  # MODES: a subset, e.g. "cuda_ipc"
  flags="--device cuda --max-model-len 16384"
  label="device -> host, loopback TCP with SHA-256 per 4 MiB chunk, host -> device"
  if [ "$mode" = cuda_ipc ]; then
    flags="$flags --disagg-cuda-ipc"
    label="CUDA IPC, device to device; the header over loopback TCP"
  fi
  mkdir -p "$out/$mode"
  echo "== state transfer: $mode"
  SERVE_FLAGS="$flags" GPU_FRACTIONS="0.3 0.6 0.9" PROMPT_WORDS="1000 2000 4000" TRANSFER_LABEL="$label" \
    LOG_DIR="$out/$mode" bash bench/disagg_transfer.sh "$bin" "$model" 2>&1 |
    tee "$out/bench_disagg_transfer_h200_$mode.log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
done
exit "$rc"

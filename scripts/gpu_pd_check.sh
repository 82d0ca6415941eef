#!/usr/bin/env bash
# On the GPU machine (issue 20, acceptance 5): a plain server, a prefill worker and a decode
# worker on one H200 (three processes, v4-flash-8layer), bench/disagg_transfer.sh over them:
# the decode phase's time (fetch, pool write, first token) beside the plain request, the answers
# checked equal, and the transfer rate. The state moves device -> host -> loopback TCP -> host ->
# device (no CUDA IPC yet). Needs .carry/*libs*.tar.xz with libucp/libuct/libucs/libucm/libnuma
# (the binary links UCX). Logs to $OUT (or ./gpu_logs); BIN_DIR holds deepinfer.
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
SERVE_FLAGS="--device cuda --max-model-len 16384" GPU_FRACTIONS="0.3 0.6 0.9" \
  PROMPT_WORDS="1000 2000 4000" LOG_DIR="$out" bash bench/disagg_transfer.sh "$bin" "$model" 2>&1 |
  tee "$out/bench_disagg_transfer_h200.log"
exit "${PIPESTATUS[0]}"

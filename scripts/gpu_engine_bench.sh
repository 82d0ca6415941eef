#!/usr/bin/env bash
# On the GPU machine: builds the v4-flash-8layer model (about 5 minutes) and benchmarks the engine
# on --device cuda at batch 128 against the isolated forward (bench latency prints both and the
# engine overhead). Logs to $OUT (or ./gpu_logs). BIN_DIR holds deepinfer (default build).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu_logs}
mkdir -p "$out"
bin=${BIN_DIR:-build}/deepinfer
source scripts/gpu_libs.sh "$bin"
model=${MODEL_DIR:-/tmp/m8}
if [ ! -f "$model/config.json" ]; then
  /usr/bin/time -v "$bin" make-tiny-model "$model" --preset v4-flash-8layer \
    --tokenizer assets/tokenizers/deepseek_v3 > "$out/make_m8.log" 2>&1 || exit 1
fi
"$bin" bench latency --device cuda --model "$model" --batch-size 128 --input-len 512 \
  --output-len 64 --max-model-len 1024 --max-num-seqs 128 \
  --output-json "$out/bench_engine_cuda_b128.json" 2>&1 | tee "$out/bench_engine_cuda_b128.log"
exit "${PIPESTATUS[0]}"

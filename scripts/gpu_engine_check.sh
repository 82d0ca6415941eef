#!/usr/bin/env bash
# On the GPU machine: the engine on --device cuda end to end, logs to $OUT (or ./gpu_logs).
#   1. cuda_engine_test: golden fixtures vs the CPU reference, 64 together vs alone, cancel,
#      n > 1 forks, structured output;
#   2. `deepinfer generate --device cuda` on the embedded default model;
#   3. the npm `openai` e2e suite against GPU servers (DEEPINFER_ACCELERATOR=nvidia), with the
#      node binary and the compiled suite carried in .carry/e2e_node.tar.xz (node, dist/,
#      node_modules/openai from build/tests/e2e/node).
# BIN_DIR holds deepinfer and cuda_engine_test (default build, build/tests/conformance/cuda).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu_logs}
mkdir -p "$out"
bin=${BIN_DIR:-build}/deepinfer
engine_test=${BIN_DIR:-build/tests/conformance/cuda}/cuda_engine_test
source scripts/gpu_libs.sh "$bin" "$engine_test"
export DEEPINFER_SOURCE_DIR=$PWD
rc=0
"$engine_test" --gtest_color=no 2>&1 | tee "$out/cuda_engine_test.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
export DEEPINFER_CACHE_DIR=/tmp/deepinfer-cache
"$bin" generate --device cuda --prompt "The capital of France is" --max-tokens 16 2>&1 |
  tee "$out/generate_cuda.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
if [ -f .carry/e2e_node.tar.xz ]; then
  mkdir -p /tmp/e2e_node && tar -xJf .carry/e2e_node.tar.xz -C /tmp/e2e_node
  DEEPINFER_ACCELERATOR=nvidia /tmp/e2e_node/node /tmp/e2e_node/dist/openai_e2e.js "$bin" 2>&1 |
    tee "$out/openai_e2e_cuda.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
fi
exit "$rc"

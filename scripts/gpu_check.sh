#!/usr/bin/env bash
# Runs the CUDA conformance suite on a GPU machine; logs go to $OUT (or ./gpu_logs).
# Build it first where nvcc is (ninja -C build cuda_ops_test) and carry build/tests/conformance.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu_logs}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
build/tests/conformance/cuda/cuda_ops_test --gtest_color=no "$@" 2>&1 | tee "$out/cuda_ops_test.log"
exit "${PIPESTATUS[0]}"

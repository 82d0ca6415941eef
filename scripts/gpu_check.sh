#!/usr/bin/env bash
# Runs the CUDA conformance suites on a GPU machine; logs go to $OUT (or ./gpu_logs).
# Build them first where nvcc is (ninja -C build cuda_ops_test cuda_model_test cuda_runner_test
# cuda_engine_test cuda_v41_test) and carry build/tests/conformance/cuda; DEEPINFER_BUILD_DIR names another
# build dir (e.g. build-cuda). Libraries the loader can't find there (CUDA 13 runtime, cuBLASLt)
# are looked up by scripts/gpu_libs.sh.
# Extra arguments go to every executable (e.g. --gtest_filter=...). cuda_v41_test reads
# shared/golden_v41 from DEEPINFER_SHARED_DIR (carry a copy: ../shared does not travel).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu_logs}
build=${DEEPINFER_BUILD_DIR:-build}
mkdir -p "$out"
# The model test reads tests/golden from this checkout, not from where the binary was built.
export DEEPINFER_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
source scripts/gpu_libs.sh "$build/tests/conformance/cuda/cuda_ops_test"
rc=0
for t in cuda_ops_test cuda_model_test cuda_runner_test cuda_engine_test cuda_v41_test; do
  "$build/tests/conformance/cuda/$t" --gtest_color=no "$@" 2>&1 | tee "$out/$t.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
done
exit "$rc"

#!/usr/bin/env bash
# Device call 1: in-row snapshots on the GPU (tests), then a 4k prompt's TTFT with and without the cache.
set -u
B=.carry/bin; mkdir -p $B && tar -xJf .carry/bin.tar.xz -C .carry
source scripts/gpu_libs.sh $B/deepinfer $B/cuda_runner_test $B/cuda_engine_test $B/prefix_cache_engine_test
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
L=/tmp/r1; mkdir -p $L
S=$L/summary.txt
nvidia-smi --query-gpu=name --format=csv,noheader > $S
t0=$(date +%s)
timeout 150 $B/cuda_runner_test --gtest_filter='CudaRowSnapshots.*:CudaYoco.*:CudaSpeculativeRows.*:CudaRunnerTest.*' > $L/runner.log 2>&1; echo "runner rc $? $(( $(date +%s) - t0 ))s" >> $S
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $L/runner.log >> $S
$B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer > $L/make.log 2>&1 &
mk=$!
t0=$(date +%s)
timeout 120 $B/cuda_engine_test > $L/engine.log 2>&1; echo "engine rc $? $(( $(date +%s) - t0 ))s" >> $S
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $L/engine.log >> $S
wait $mk; echo "make rc $?" >> $S
lat() {  # name binary flags...
  local name=$1 bin=$2; shift 2
  timeout 100 $bin bench latency --device cuda --model /tmp/m8 --batch-size 1 --input-len 4096 \
    --output-len 8 --no-isolated "$@" > $L/lat_$name.log 2>&1
  echo "lat $name rc $?" >> $S
  grep -E "TTFT p50|step-time breakdown over" $L/lat_$name.log >> $S
}
lat new_def $B/deepinfer
lat new_8192 $B/deepinfer --max-num-batched-tokens 8192
lat nocache_8192 $B/deepinfer --max-num-batched-tokens 8192 --no-prefix-cache
t0=$(date +%s)
DEEPINFER_TEST_DEVICE=cuda timeout 100 $B/prefix_cache_engine_test \
  --gtest_filter='PrefixCacheEngine.*:PrefixCacheTorture.LargePoolHitsAndMatchesCacheOff' > $L/pc.log 2>&1
echo "prefix_cache_engine_test(cuda) rc $? $(( $(date +%s) - t0 ))s" >> $S
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $L/pc.log >> $S
cat $S
tar -czf $OUT/r1.tgz -C $L .

#!/usr/bin/env bash
# Device call 3 (little device time left): correctness of the page-locked page I/O only.
set -u
B=.carry/bin; mkdir -p $B && tar -xJf .carry/bin.tar.xz -C .carry
source scripts/gpu_libs.sh $B/cuda_runner_test $B/prefix_cache_engine_test $B/engine_test
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
L=/tmp/r3; mkdir -p $L; S=$L/summary.txt
nvidia-smi --query-gpu=name --format=csv,noheader > $S
timeout 90 $B/cuda_runner_test --gtest_filter='*PageBytesRoundTrip*:CudaRowSnapshots.*' > $L/runner.log 2>&1; echo "runner rc $?" >> $S
DEEPINFER_TEST_DEVICE=cuda timeout 120 $B/prefix_cache_engine_test --gtest_filter='*HostTier*:*Restart*:PrefixCacheEngine.*:*LargePool*' > $L/pc.log 2>&1; echo "prefix_cache(cuda) rc $?" >> $S
DEEPINFER_ACCELERATOR=nvidia timeout 60 $B/engine_test --gtest_filter='*StepBudget*' > $L/budget.log 2>&1; echo "engine budget(cuda) rc $?" >> $S
for f in runner pc budget; do grep -E "^\[       OK|FAILED  \]" $L/$f.log >> $S; done
cat $S
tar -czf $OUT/r3.tgz -C $L .

#!/usr/bin/env bash
# Device call 5: 2975744's async snapshot copies on cuda (tests), the new rms_norm_row load-ahead
# and split-k GEMV (op tests, batch invariance, goldens), then bench forward and latency beside
# the base binary (2975744's kernels) in the same call.
set -u
B=.carry/bin; mkdir -p $B && tar -xJf .carry/bin.tar.xz -C .carry
xz -dc .carry/deepinfer_base.xz > /tmp/deepinfer_base && chmod +x /tmp/deepinfer_base
source scripts/gpu_libs.sh $B/deepinfer $B/cuda_ops_test $B/cuda_runner_test $B/cuda_engine_test $B/prefix_cache_engine_test
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
L=/tmp/r5; mkdir -p $L; S=$L/summary.txt
nvidia-smi --query-gpu=name --format=csv,noheader > $S
$B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer > $L/make.log 2>&1 &
mk=$!
t() {  # name timeout binary args...
  local name=$1 to=$2; shift 2
  local t0=$(date +%s)
  timeout $to "$@" > $L/$name.log 2>&1; echo "$name rc $? $(( $(date +%s) - t0 ))s" >> $S
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $L/$name.log >> $S
}
t ops 240 $B/cuda_ops_test --gtest_filter='CudaLinear.*:CudaRmsNorm*:CudaMhc*:CudaCompressor*:CudaDecodeCompressor*:CudaGemm*:CudaMoe*:CudaV41Ops*'
t batch_inv 240 $B/cuda_batch_invariance_test
t runner 200 $B/cuda_runner_test
for s in 2925068507 7; do
  DEEPINFER_TORTURE_SEED=$s DEEPINFER_TEST_DEVICE=cuda t pc_preempt_$s 60 $B/prefix_cache_engine_test --gtest_filter='*Preempted*:PrefixCacheEngine.*'
done
t model 300 $B/cuda_model_test
wait $mk; echo "make rc $?" >> $S
fwd() {  # name binary
  timeout 150 $2 bench forward --device cuda --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 \
    --steps 8 --phase-times > $L/fwd_$1.log 2>&1; echo "fwd $1 rc $?" >> $S
  grep -E "^\| (decode|prefill)" $L/fwd_$1.log >> $S
}
fwd base /tmp/deepinfer_base
fwd new $B/deepinfer
lat() {  # name binary
  timeout 100 $2 bench latency --device cuda --model /tmp/m8 --batch-size 1 --input-len 4096 \
    --output-len 8 --no-isolated > $L/lat_$1.log 2>&1; echo "lat $1 rc $?" >> $S
  grep -E "TTFT p50|ITL p50|budget" $L/lat_$1.log >> $S
}
lat new $B/deepinfer
cat $S
tar -czf $OUT/r5.tgz -C $L .

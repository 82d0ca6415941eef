#!/usr/bin/env bash
# Device call 7: FP8/MXFP4 expansion by integer ops with the 2^120 folded into the scale
# (weight_rows.cuh): the bit-exact dequantize tests, the GEMV and expert op tests, invariance,
# goldens; then bench forward beside the base (HEAD before it) in the same call.
set -u
B=.carry/bin; mkdir -p $B && tar -xJf .carry/bin.tar.xz -C .carry
xz -dc .carry/deepinfer_base.xz > /tmp/deepinfer_base && chmod +x /tmp/deepinfer_base
source scripts/gpu_libs.sh $B/deepinfer $B/cuda_ops_test $B/cuda_model_test
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
L=/tmp/r7; mkdir -p $L; S=$L/summary.txt
nvidia-smi --query-gpu=name --format=csv,noheader > $S
$B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer > $L/make.log 2>&1 &
mk=$!
t() {  # name timeout binary args...
  local name=$1 to=$2; shift 2
  local t0=$(date +%s)
  timeout $to "$@" > $L/$name.log 2>&1; echo "$name rc $? $(( $(date +%s) - t0 ))s" >> $S
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $L/$name.log >> $S
}
t ops 240 $B/cuda_ops_test --gtest_filter='CudaDequantize.*:CudaLinear.*:CudaMoe*'
t batch_inv 240 $B/cuda_batch_invariance_test
t model 300 $B/cuda_model_test

wait $mk; echo "make rc $?" >> $S
fwd() {  # name binary
  timeout 150 $2 bench forward --device cuda --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 \
    --steps 8 --phase-times > $L/fwd_$1.log 2>&1; echo "fwd $1 rc $?" >> $S
  grep -E "^\| (decode|prefill)" $L/fwd_$1.log >> $S
}
fwd base /tmp/deepinfer_base
fwd new $B/deepinfer

cat $S
tar -czf $OUT/r7.tgz -C $L .

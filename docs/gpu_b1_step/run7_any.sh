#!/usr/bin/env bash
# Run 7 (either card): L2 bulk prefetch in the GEMV (persistent grid) and the decode W4 experts,
# the compile-time-hc Sinkhorn, the head's collapse and the batched decode compressor. Before it,
# here:
#   scripts/build_gpu_variants.sh build g1:GEMV_L2_BLOCKS=1 \
#     g2:GEMV_L2_BLOCKS=2,GEMV_BLOCKS_PER_SM=2 w4p:W4_L2_PREFETCH=1 \
#     gw:GEMV_L2_BLOCKS=2,GEMV_BLOCKS_PER_SM=2,W4_L2_PREFETCH=1
#   ninja -C build <pack_gpu_carry.sh's targets>; scripts/pack_gpu_carry.sh build
#   rm .carry/redis.tar.xz; .carry/base.tar.xz = ff84e26's stripped deepinfer as deepinfer_base
#   cp docs/gpu_b1_step/run7_any.sh .carry/run7.sh
# Logs go into one tar under $OUT, key lines to stdout. Trimmed to about 200 s (the session's
# device time ran short after refused starts): no ncu, no invariance test.
set -u
t0=$SECONDS
L=/tmp/g7; mkdir -p $L
trap 'tar -cJf $OUT/g7.tar.xz -C /tmp g7' EXIT
mkdir -p .carry/bin && tar -xJf .carry/bin.tar.xz -C .carry && tar -xJf .carry/variants.tar.xz -C .carry/bin
tar -xJf .carry/base.tar.xz -C .carry/bin
mkdir -p .carry/shared && tar -xJf .carry/golden_v41.tar.xz -C .carry/shared
source scripts/gpu_libs.sh .carry/bin/deepinfer .carry/bin/cuda_ops_test
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
B=.carry/bin
nvidia-smi > $L/gpu.txt 2>&1
grep -o "NVIDIA H[0-9]*[^|]*" $L/gpu.txt | head -1
(time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer) > $L/make_m8.log 2>&1 &
mk=$!
ops() {  # name binary filter timeout
  GTEST_FILTER="$3" timeout ${4:-150} $2 --gtest_color=no > $L/ops_$1.log 2>&1
  echo "ops $1 rc $? at $((SECONDS - t0))"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $L/ops_$1.log | head -8
}
ops main $B/cuda_ops_test 'CudaMhc.*:CudaDecode*:CudaLinear.*:CudaSinkAttention.*' 60
ops gw $B/ops_gw 'CudaLinear.*' 40
wait $mk; echo "make rc $? at $((SECONDS - t0))"
bench() {  # name binary
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 90 $2 bench forward --device cuda \
    --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times \
    --output-json $L/bench_$1.json > $L/bench_$1.log 2>&1
  echo "bench $1 rc $? at $((SECONDS - t0))"; grep -E '^\| (prefill|decode)' $L/bench_$1.log
}
bench base $B/deepinfer_base
bench main $B/deepinfer
for v in gw g2 w4p; do bench $v $B/deepinfer_$v; done
ncu_b1() {  # name binary
  [ $((SECONDS - t0)) -lt 150 ] || return
  timeout 100 ncu --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,launch__grid_size --csv --page raw \
    $2 bench forward --device cuda --model /tmp/m8 --batch-sizes 1 --context 4096 \
    --steps 2 > $L/ncu_$1.csv 2> $L/ncu_$1.err
  echo "ncu $1 rc $? at $((SECONDS - t0))"
}
for tb in cuda_model_test; do
  [ $((SECONDS - t0)) -lt 190 ] || break
  timeout 45 $B/$tb --gtest_color=no > $L/$tb.log 2>&1
  echo "$tb rc $? at $((SECONDS - t0))"; grep -E '^\[  (PASSED|FAILED)|trials' $L/$tb.log | head -4
done

#!/usr/bin/env bash
# Run 6 (either card; it got an H100). Before it, here:
#   scripts/build_gpu_variants.sh build ns3:W4_NARROW_STAGES=3 ns4:W4_NARROW_STAGES=4 \
#     sq1:SINK_Q_BATCH=1 mq16:SINK_MMA_MIN_QUERIES=16
#   ninja -C build <the targets pack_gpu_carry.sh lists>; scripts/pack_gpu_carry.sh build
#   rm .carry/redis.tar.xz; cp docs/gpu_b1_step/run6_next.sh .carry/run6.sh
# Every log goes into one tar under $OUT (the device returns only a few files a call), and the
# key lines to stdout. H200: main beside transformers eager (issue 16's table). H100: ncu of a
# B=1 decode step.
set -u
t0=$SECONDS
L=/tmp/g6; mkdir -p $L
trap 'tar -cJf $OUT/g6.tar.xz -C /tmp g6' EXIT
mkdir -p .carry/bin && tar -xJf .carry/bin.tar.xz -C .carry && tar -xJf .carry/variants.tar.xz -C .carry/bin
mkdir -p .carry/shared && tar -xJf .carry/golden_v41.tar.xz -C .carry/shared
source scripts/gpu_libs.sh .carry/bin/deepinfer .carry/bin/cuda_ops_test
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
B=.carry/bin
nvidia-smi > $L/gpu.txt 2>&1
h200=0; grep -q H200 $L/gpu.txt && h200=1; echo "h200=$h200"
(time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer) > $L/make_m8.log 2>&1 &
mk=$!
for v in ns3 ns4; do
  GTEST_FILTER='CudaMoe.*' timeout 150 $B/ops_$v --gtest_color=no > $L/ops_moe_$v.log 2>&1
  echo "ops moe $v rc $? at $((SECONDS - t0))"
done
wait $mk; echo "make rc $? at $((SECONDS - t0))"
bench() {  # name binary timeout extra
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout ${3:-90} $2 bench forward --device cuda \
    --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times ${4:-} \
    --output-json $L/bench_$1.json > $L/bench_$1.log 2>&1
  echo "bench $1 rc $? at $((SECONDS - t0))"; grep -E '^\| (prefill|decode)' $L/bench_$1.log
}
bench main $B/deepinfer
for v in ns3 ns4 sq1 mq16; do bench $v $B/deepinfer_$v; done
if [ $h200 = 1 ]; then
  bench reference $B/deepinfer 200 "--reference transformers --reference-args=--load=dequant"
else
  timeout 150 ncu --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,launch__grid_size --csv --page raw \
    $B/deepinfer bench forward --device cuda --model /tmp/m8 --batch-sizes 1 --context 4096 \
    --steps 2 > $L/ncu_b1.csv 2> $L/ncu_b1.err
  echo "ncu B=1 rc $? at $((SECONDS - t0))"
fi
for tb in cuda_model_test cuda_batch_invariance_test; do
  [ $((SECONDS - t0)) -lt 500 ] || break
  timeout 80 $B/$tb --gtest_color=no > $L/$tb.log 2>&1
  echo "$tb rc $? at $((SECONDS - t0))"; grep -E '^\[  (PASSED|FAILED)|trials' $L/$tb.log | head -4
done

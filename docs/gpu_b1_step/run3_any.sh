#!/usr/bin/env bash
# Either card. The streaming GEMV (main: GEMV_STREAM=1) against the warp-per-column kernel (gs0)
# and its stage / occupancy variants (st4, bps3); the sink attention variants sq1
# (SINK_Q_BATCH=1) and mq16 (SINK_MMA_MIN_QUERIES=16). Op tests (CudaLinear: the streaming
# kernel's bits against the warp kernel's; CudaMoe: the 64-row W4 kernels), batch invariance and
# V4 goldens on main. H200: the table with transformers eager beside (bench --reference). H100:
# every kernel of a B=1 decode step under ncu for main. Logs straight to $OUT.
set -u
t0=$SECONDS
mkdir -p .carry/bin && tar -xJf .carry/bin.tar.xz -C .carry && tar -xJf .carry/variants.tar.xz -C .carry/bin
mkdir -p .carry/shared && tar -xJf .carry/golden_v41.tar.xz -C .carry/shared
source scripts/gpu_libs.sh .carry/bin/deepinfer .carry/bin/cuda_ops_test
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
B=.carry/bin
nvidia-smi > $OUT/gpu.txt 2>&1
h200=0; grep -q H200 $OUT/gpu.txt && h200=1; echo "h200=$h200"
(time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer) > $OUT/make_m8.log 2>&1 &
mk=$!
GTEST_FILTER='CudaLinear.*:CudaMoe.*' timeout 200 $B/cuda_ops_test --gtest_color=no > $OUT/ops.log 2>&1
echo "ops rc $? at $((SECONDS - t0))"; grep -E '^\[ +(OK|FAILED|PASSED)' $OUT/ops.log
wait $mk; echo "make rc $? at $((SECONDS - t0))"
bench() {  # name binary timeout extra
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout ${3:-90} $2 bench forward --device cuda \
    --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times ${4:-} \
    --output-json $OUT/bench_$1.json > $OUT/bench_$1.log 2>&1
  echo "bench $1 rc $? at $((SECONDS - t0))"; grep -E '^\| (prefill|decode)' $OUT/bench_$1.log
}
bench main $B/deepinfer
bench gs0 $B/deepinfer_gs0
bench st4 $B/deepinfer_st4
bench bps3 $B/deepinfer_bps3
bench sq1 $B/deepinfer_sq1
bench mq16 $B/deepinfer_mq16
for tb in cuda_batch_invariance_test cuda_model_test; do
  timeout 90 $B/$tb --gtest_color=no > $OUT/$tb.log 2>&1
  echo "$tb rc $? at $((SECONDS - t0))"; grep -E '^\[  (PASSED|FAILED)|trials' $OUT/$tb.log | head -4
done
if [ $h200 = 1 ]; then
  bench reference $B/deepinfer 200 "--reference transformers --reference-args=--load=dequant"
else
  for v in deepinfer; do
    timeout 150 ncu --clock-control none --cache-control none \
      --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv --page raw \
      $B/$v bench forward --device cuda --model /tmp/m8 --batch-sizes 1 --context 4096 \
      --steps 2 > $OUT/ncu_b1_$v.csv 2> $OUT/ncu_b1_$v.err
    echo "ncu B=1 $v rc $? at $((SECONDS - t0)): $(wc -l < $OUT/ncu_b1_$v.csv) lines"; tail -2 $OUT/ncu_b1_$v.err
    xz -9 $OUT/ncu_b1_$v.csv
  done
fi

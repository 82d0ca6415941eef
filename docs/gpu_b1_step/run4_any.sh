#!/usr/bin/env bash
# Either card, lean (device time is short): main = the streaming GEMV (GEMV_STREAM=1) + norm_rope
# + rms_norm's bf16 output + hc_pre's y_bf16; gs0 = the same with the warp-per-column GEMV. The
# streaming kernel's op test runs first: if it fails or hangs, the benches take gs0 as main.
# Then goldens and batch invariance, then (time left) ncu of a B=1 step on an H100 or the
# transformers-eager table on an H200, then the wider op tests. Logs straight to $OUT.
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
GTEST_FILTER='CudaLinear.GemvStream*' timeout 60 $B/cuda_ops_test --gtest_color=no > $OUT/ops_stream.log 2>&1
rc=$?; echo "ops stream rc $rc at $((SECONDS - t0))"; grep -E '^\[ +(OK|FAILED|PASSED)' $OUT/ops_stream.log
M=$B/deepinfer
[ $rc = 0 ] || { M=$B/deepinfer_gs0; echo "streaming GEMV failed or hung: benches take gs0"; }
GTEST_FILTER='CudaNormRope.*:CudaRmsNorm.*:CudaRope.*:CudaMhc.*' timeout 60 $B/cuda_ops_test \
  --gtest_color=no > $OUT/ops_new.log 2>&1
echo "ops new rc $? at $((SECONDS - t0))"; grep -E '^\[ +(OK|FAILED|PASSED)' $OUT/ops_new.log
wait $mk; echo "make rc $? at $((SECONDS - t0))"
bench() {  # name binary timeout extra
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout ${3:-90} $2 bench forward --device cuda \
    --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times ${4:-} \
    --output-json $OUT/bench_$1.json > $OUT/bench_$1.log 2>&1
  echo "bench $1 rc $? at $((SECONDS - t0))"; grep -E '^\| (prefill|decode)' $OUT/bench_$1.log
}
bench main $M
bench gs0 $B/deepinfer_gs0
for tb in cuda_model_test cuda_batch_invariance_test cuda_v41_test; do
  timeout 90 $B/$tb --gtest_color=no > $OUT/$tb.log 2>&1
  echo "$tb rc $? at $((SECONDS - t0))"; grep -E '^\[  (PASSED|FAILED)|trials' $OUT/$tb.log | head -4
done
if [ $h200 = 1 ]; then
  bench reference $M 200 "--reference transformers --reference-args=--load=dequant"
elif [ $((SECONDS - t0)) -lt 330 ]; then
  timeout 150 ncu --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,launch__grid_size --csv --page raw \
    $M bench forward --device cuda --model /tmp/m8 --batch-sizes 1 --context 4096 \
    --steps 2 > $OUT/ncu_b1.csv 2> $OUT/ncu_b1.err
  echo "ncu B=1 rc $? at $((SECONDS - t0)): $(wc -l < $OUT/ncu_b1.csv) lines"; tail -2 $OUT/ncu_b1.err
  xz -9 $OUT/ncu_b1.csv
fi
if [ $((SECONDS - t0)) -lt 450 ]; then
  GTEST_FILTER='CudaLinear.*:CudaMoe.*:CudaDecode*' timeout $((560 - (SECONDS - t0))) \
    $B/cuda_ops_test --gtest_color=no > $OUT/ops_wide.log 2>&1
  echo "ops wide rc $? at $((SECONDS - t0))"; grep -E '^\[ +(OK|FAILED|PASSED)' $OUT/ops_wide.log
fi

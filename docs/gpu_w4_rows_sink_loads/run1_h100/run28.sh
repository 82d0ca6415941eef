#!/usr/bin/env bash
# H100: the W4 wgmma kernel's 128-row passes. CudaMoe + CudaLinear op tests (main), bench of main,
# r64 (64-row passes only, the old path) and wee (early expansion), batch invariance and the
# goldens, then ncu of prefill's w4_wgmma kernels (main).
set -u
R=$OUT; export OUT=/tmp/g28; mkdir -p $OUT
t0=$SECONDS
mkdir -p .carry/bin && tar -xJf .carry/bin.tar.xz -C .carry && tar -xJf .carry/variants.tar.xz -C .carry/bin
mkdir -p .carry/shared && tar -xJf .carry/golden_v41.tar.xz -C .carry/shared
source scripts/gpu_libs.sh .carry/bin/deepinfer .carry/bin/cuda_ops_test
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
B=.carry/bin
nvidia-smi > $OUT/gpu.txt 2>&1
(time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer) > $OUT/make_m8.log 2>&1 &
mk=$!
GTEST_FILTER='CudaMoe.*:CudaLinear.*' timeout 200 $B/cuda_ops_test --gtest_color=no > $OUT/ops.log 2>&1
echo "ops rc $? at $((SECONDS - t0))"; grep -E '^\[ +(OK|FAILED|PASSED)' $OUT/ops.log
wait $mk; echo "make rc $? at $((SECONDS - t0))"
bench() {  # name binary
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 90 $2 bench forward --device cuda \
    --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times \
    --output-json $OUT/bench_$1.json > $OUT/bench_$1.log 2>&1
  echo "bench $1 rc $? at $((SECONDS - t0))"; grep -E '^\| (prefill|decode)|moe: experts' $OUT/bench_$1.log
}
bench main $B/deepinfer
bench r64 $B/deepinfer_r64
bench wee $B/deepinfer_wee
for tb in cuda_batch_invariance_test cuda_model_test cuda_v41_test; do
  timeout 60 $B/$tb --gtest_color=no > $OUT/$tb.log 2>&1
  echo "$tb rc $? at $((SECONDS - t0))"; grep -E '^\[  (PASSED|FAILED)|trials' $OUT/$tb.log | head -4
done
timeout 150 ncu --clock-control none -k 'regex:w4_wgmma' --launch-count 16 --section SpeedOfLight \
  --section ComputeWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy \
  --csv --page raw $B/deepinfer bench forward --device cuda --model /tmp/m8 --batch-sizes 1 \
  --context 4096 --steps 1 > $OUT/ncu_prefill.csv 2> $OUT/ncu_prefill.err
echo "ncu rc $? at $((SECONDS - t0)): $(wc -l < $OUT/ncu_prefill.csv) lines"; tail -2 $OUT/ncu_prefill.err
tar -cJf $R/g28.tar.xz -C /tmp g28

#!/usr/bin/env bash
# H100: to_bf16 at 8 values a thread, mHC partial sums over 8 or 16 tokens a block, the tensor-core
# sink attention's batched loads. Op tests (CudaGemm, CudaMhc, CudaLinear, CudaSinkAttention), bench
# of main, m4 (4 tokens a block everywhere), tb1 (to_bf16 a value a thread), sb1 (a load at a time), ncu durations of a prefill's mix_partials (main, m4), batch
# invariance and both families' goldens.
set -u
R=$OUT; export OUT=/tmp/g30; mkdir -p $OUT
t0=$SECONDS
mkdir -p .carry/bin && tar -xJf .carry/bin.tar.xz -C .carry && tar -xJf .carry/variants.tar.xz -C .carry/bin
mkdir -p .carry/shared && tar -xJf .carry/golden_v41.tar.xz -C .carry/shared
source scripts/gpu_libs.sh .carry/bin/deepinfer .carry/bin/cuda_ops_test
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
B=.carry/bin
nvidia-smi > $OUT/gpu.txt 2>&1
(time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer) > $OUT/make_m8.log 2>&1 &
mk=$!
GTEST_FILTER='CudaGemm.*:CudaMhc.*:CudaLinear.*:CudaSinkAttention.*' timeout 150 $B/cuda_ops_test --gtest_color=no > $OUT/ops.log 2>&1
echo "ops rc $? at $((SECONDS - t0))"; grep -E '^\[ +(OK|FAILED|PASSED)' $OUT/ops.log
wait $mk; echo "make rc $? at $((SECONDS - t0))"
bench() {  # name binary
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 90 $2 bench forward --device cuda \
    --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times \
    --output-json $OUT/bench_$1.json > $OUT/bench_$1.log 2>&1
  echo "bench $1 rc $? at $((SECONDS - t0))"; grep -E '^\| (prefill|decode)|mhc|CSA sink' $OUT/bench_$1.log
}
bench main $B/deepinfer
bench m4 $B/deepinfer_m4
bench tb1 $B/deepinfer_tb1
bench sb1 $B/deepinfer_sb1
for v in deepinfer deepinfer_m4; do
  timeout 60 ncu --clock-control none -k 'regex:mix_partials' --launch-count 17 \
    --metrics gpu__time_duration.sum,launch__grid_size --csv --page raw $B/$v bench forward \
    --device cuda --model /tmp/m8 --batch-sizes 1 --context 4096 --steps 1 > $OUT/ncu_mix_$v.csv 2> $OUT/ncu_mix_$v.err
  echo "ncu mix $v rc $? at $((SECONDS - t0))"
done
for tb in cuda_batch_invariance_test cuda_model_test cuda_v41_test; do
  timeout 60 $B/$tb --gtest_color=no > $OUT/$tb.log 2>&1
  echo "$tb rc $? at $((SECONDS - t0))"; grep -E '^\[  (PASSED|FAILED)|trials' $OUT/$tb.log | head -4
done
tar -cJf $R/g30.tar.xz -C /tmp g30

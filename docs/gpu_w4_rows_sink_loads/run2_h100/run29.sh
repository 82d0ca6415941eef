#!/usr/bin/env bash
# H100: the W4 wgmma kernel's narrow tail passes. CudaMoe op tests (main), bench of main and nt0
# (every pass all R rows), ncu durations of prefill's w4_wgmma launches for both, then every
# kernel's duration in decode B=128 steps (warm caches, as in a graph replay).
set -u
R=$OUT; export OUT=/tmp/g29; mkdir -p $OUT
t0=$SECONDS
mkdir -p .carry/bin && tar -xJf .carry/bin.tar.xz -C .carry && tar -xJf .carry/variants.tar.xz -C .carry/bin
source scripts/gpu_libs.sh .carry/bin/deepinfer .carry/bin/cuda_ops_test
B=.carry/bin
nvidia-smi > $OUT/gpu.txt 2>&1
(time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer) > $OUT/make_m8.log 2>&1 &
mk=$!
GTEST_FILTER='CudaMoe.*' timeout 200 $B/cuda_ops_test --gtest_color=no > $OUT/ops.log 2>&1
echo "ops rc $? at $((SECONDS - t0))"; grep -E '^\[ +(OK|FAILED|PASSED)' $OUT/ops.log
wait $mk; echo "make rc $? at $((SECONDS - t0))"
bench() {  # name binary
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 90 $2 bench forward --device cuda \
    --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times \
    --output-json $OUT/bench_$1.json > $OUT/bench_$1.log 2>&1
  echo "bench $1 rc $? at $((SECONDS - t0))"; grep -E '^\| (prefill|decode)|moe: experts' $OUT/bench_$1.log
}
bench main $B/deepinfer
bench nt0 $B/deepinfer_nt0
for v in deepinfer deepinfer_nt0; do
  timeout 60 ncu --clock-control none -k 'regex:w4_wgmma' --launch-count 16 \
    --metrics gpu__time_duration.sum,launch__grid_size --csv --page raw $B/$v bench forward \
    --device cuda --model /tmp/m8 --batch-sizes 1 --context 4096 --steps 1 > $OUT/ncu_w4_$v.csv 2> $OUT/ncu_w4_$v.err
  echo "ncu w4 $v rc $? at $((SECONDS - t0))"
done
timeout 240 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum,launch__grid_size \
  --csv --page raw $B/deepinfer bench forward --device cuda --model /tmp/m8 --batch-sizes 128 \
  --context 4096 --steps 2 > $OUT/ncu_b128.csv 2> $OUT/ncu_b128.err
echo "ncu B=128 rc $? at $((SECONDS - t0)): $(wc -l < $OUT/ncu_b128.csv) lines"; tail -2 $OUT/ncu_b128.err
xz -9 $OUT/ncu_b128.csv
tar -cJf $R/g29.tar.xz -C /tmp g29

#!/usr/bin/env bash
# H100, about 7 minutes: op tests (CudaLinear, CudaMoe) of main and of each carried variant, bench
# forward of each, then ncu durations of decode B=128's FP8 projection kernels (fp8_wgmma,
# fp8_mma, sum_splits) with the grid each ran. Variants meant for it (build_gpu_variants.sh):
#   ee:FP8_WGMMA_EARLY_EXPAND=1   fp8_wgmma's fragments expanded beside the running wgmma
#   wee:W4_WGMMA_EARLY_EXPAND=1   the same in prefill's MXFP4 expert kernel
set -u
R=$OUT; export OUT=/tmp/g26; mkdir -p $OUT
t0=$SECONDS
mkdir -p .carry/bin && tar -xJf .carry/bin.tar.xz -C .carry && tar -xJf .carry/variants.tar.xz -C .carry/bin
source scripts/gpu_libs.sh .carry/bin/deepinfer .carry/bin/cuda_ops_test
B=.carry/bin
nvidia-smi > $OUT/gpu.txt 2>&1
(time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer) > $OUT/make_m8.log 2>&1 &
mk=$!
for t in cuda_ops_test $(cd $B && ls ops_* 2>/dev/null); do
  GTEST_FILTER='CudaLinear.*:CudaMoe.*' timeout 110 $B/$t --gtest_color=no > $OUT/$t.log 2>&1
  echo "$t rc $? at $((SECONDS - t0))"; grep -E '^\[ +(OK|FAILED|PASSED)' $OUT/$t.log
done
wait $mk; echo "make rc $? at $((SECONDS - t0))"
for v in deepinfer $(cd $B && ls deepinfer_* 2>/dev/null); do
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 60 $B/$v bench forward --device cuda \
    --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times \
    --output-json $OUT/bench_$v.json > $OUT/bench_$v.log 2>&1
  echo "bench $v rc $? at $((SECONDS - t0))"; grep -E '^\| (prefill|decode)' $OUT/bench_$v.log
done
timeout 100 ncu --clock-control none --cache-control all -k 'regex:fp8_wgmma|fp8_mma|sum_splits' \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size \
  --csv --page raw $B/deepinfer bench forward --device cuda --model /tmp/m8 --batch-sizes 128 \
  --context 4096 --steps 1 > $OUT/ncu_b128.csv 2> $OUT/ncu_b128.err
echo "ncu rc $? at $((SECONDS - t0)): $(wc -l < $OUT/ncu_b128.csv) lines"; tail -2 $OUT/ncu_b128.err
tar -cJf $R/g26.tar.xz -C /tmp g26

#!/usr/bin/env bash
# H100/H200: the streaming GEMV at 512-byte chunks (main) against the warp kernel (gs0): op test, bench.
set -u
t0=$SECONDS
mkdir -p .carry/bin && tar -xJf .carry/bin.tar.xz -C .carry && tar -xJf .carry/variants.tar.xz -C .carry/bin
source scripts/gpu_libs.sh .carry/bin/deepinfer .carry/bin/cuda_ops_test
B=.carry/bin
nvidia-smi -L
(time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer) > /tmp/make_m8.log 2>&1 &
mk=$!
GTEST_FILTER='CudaLinear.GemvStream*' timeout 90 $B/cuda_ops_test --gtest_color=no > $OUT/ops_stream.log 2>&1
echo "ops stream rc $? at $((SECONDS - t0))"; grep -E '^\[ +(OK|FAILED|PASSED)|streaming|bits' $OUT/ops_stream.log | head -20
wait $mk; echo "make rc $? at $((SECONDS - t0))"
i=0
for v in deepinfer deepinfer_gs0 deepinfer; do
  i=$((i + 1))
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 60 $B/$v bench forward --device cuda \
    --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times \
    > $OUT/bench_${i}_$v.log 2>&1
  echo "bench $v rc $? at $((SECONDS - t0))"; grep -E '^\| (prefill|decode)|projection' $OUT/bench_${i}_$v.log
done

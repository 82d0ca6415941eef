#!/usr/bin/env bash
# One call: fp8_wgmma's op tests, issue 16's table beside transformers eager (phase 3) when the
# GPU holds the reference (REF=1), the variants' bench (mma: fp8_mma everywhere, the baseline;
# ww0: K split to at least a wave), batch invariance, the goldens.
set -u
R=$OUT; export OUT=/tmp/g25; mkdir -p $OUT
t0=$SECONDS
mkdir -p .carry/bin && tar -xJf .carry/bin.tar.xz -C .carry && tar -xJf .carry/variants.tar.xz -C .carry/bin
mkdir -p .carry/shared && tar -xJf .carry/golden_v41.tar.xz -C .carry/shared
source scripts/gpu_libs.sh .carry/bin/deepinfer .carry/bin/cuda_ops_test
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
B=.carry/bin
nvidia-smi > $OUT/gpu.txt 2>&1
(time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer) > $OUT/make_m8.log 2>&1 &
mk=$!
GTEST_FILTER='CudaLinear.*' timeout 100 $B/cuda_ops_test --gtest_color=no > $OUT/ops_linear.log 2>&1
echo "ops CudaLinear rc $? at $((SECONDS - t0))"; grep -E '^\[ +(OK|FAILED|PASSED)' $OUT/ops_linear.log
wait $mk; echo "make rc $? at $((SECONDS - t0))"
bench() {  # name binary extra
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout ${3:-120} $2 bench forward --device cuda \
    --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times $4 \
    --output-json $OUT/bench_$1.json > $OUT/bench_$1.log 2>&1
  echo "bench $1 rc $? at $((SECONDS - t0))"; grep -E '^\| (prefill|decode)' $OUT/bench_$1.log
}
if [ "${REF:-0}" = 1 ]; then
  bench reference $B/deepinfer 300 "--reference transformers --reference-args=--load=dequant"
fi
bench main $B/deepinfer 120 ""
for v in $B/deepinfer_*; do [ $((SECONDS - t0)) -lt 430 ] && bench ${v##*deepinfer_} $v 120 ""; done
for tb in cuda_batch_invariance_test cuda_model_test cuda_v41_test; do
  [ $((SECONDS - t0)) -lt 520 ] || break
  timeout 60 $B/$tb --gtest_color=no > $OUT/$tb.log 2>&1
  echo "$tb rc $? at $((SECONDS - t0))"; grep -E '^\[  (PASSED|FAILED)|trials' $OUT/$tb.log | head -4
done
tar -cJf $R/g25.tar.xz -C /tmp g25

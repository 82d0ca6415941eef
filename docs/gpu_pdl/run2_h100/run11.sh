#!/usr/bin/env bash
# Device call 11 (about 300 s of budget): the adopted defaults (decode W4A16 blocks of 4 warps,
# knobs dropped) through the touched op tests, batch invariance and both goldens, then bench
# forward with PDL on and off.
set -u
R=$OUT
export OUT=/tmp/g11; mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
mkdir -p .carry/bin && tar -xJf .carry/bin.tar.xz -C .carry
mkdir -p .carry/shared && tar -xJf .carry/golden_v41.tar.xz -C .carry/shared
B=.carry/bin
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
source scripts/gpu_libs.sh $B/deepinfer $B/cuda_ops_test
t0=$SECONDS
( time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer ) > $OUT/make_m8.log 2>&1 &
mk=$!
suite() {  # binary timeout [gtest filter]
  timeout $2 $B/$1 --gtest_color=no ${3:+--gtest_filter=$3} > $OUT/$1.log 2>&1
  echo "$1 rc $? at $((SECONDS - t0)) s"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/$1.log | head -6
}
suite cuda_ops_test 60 'CudaLaunch.*:CudaMhc.*:CudaRmsNorm*:CudaDecodeCompressor*:CudaLinear.*:CudaMoe.*:CudaIndexer.*'
suite cuda_batch_invariance_test 50
suite cuda_model_test 40
suite cuda_v41_test 40
wait $mk; echo "make rc $? at $((SECONDS - t0)) s"
for p in 1 0; do
  [ $((SECONDS - t0)) -lt 200 ] || break
  DEEPINFER_PDL=$p timeout 30 $B/deepinfer bench forward --device cuda --model /tmp/m8 \
    --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times \
    --output-json $OUT/bench_pdl$p.json > $OUT/bench_pdl$p.log 2>&1
  echo "bench pdl$p rc $? at $((SECONDS - t0)) s"
  grep -E '^\| (prefill|decode)' $OUT/bench_pdl$p.log
done
tar -czf $R/g11.tgz -C /tmp g11

#!/usr/bin/env bash
# Device call 12: main (30e672b + bench's prefill chunk at the engine's budget) checked before any
# new work: every op test, invariance, both goldens, bench forward, the engine's 4k TTFT, then the
# runner, engine, speculative, DSpark and prefix-cache suites on cuda with PDL on.
set -u
R=$OUT
export OUT=/tmp/g12; mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
mkdir -p .carry/bin && tar -xJf .carry/bin.tar.xz -C .carry
mkdir -p .carry/shared && tar -xJf .carry/golden_v41.tar.xz -C .carry/shared
mkdir -p /tmp/redis && tar -xJf .carry/redis.tar.xz -C /tmp/redis && export PATH=/tmp/redis:$PATH
B=.carry/bin
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
source scripts/gpu_libs.sh $B/deepinfer $B/cuda_ops_test $B/prefix_cache_engine_test
t0=$SECONDS
left() { [ $((SECONDS - t0)) -lt $1 ]; }
( time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer ) > $OUT/make_m8.log 2>&1 &
mk=$!
suite() {  # binary timeout tag [env...]
  local b=$1 to=$2 tag=$3; shift 3
  env "$@" timeout $to $B/$b --gtest_color=no > $OUT/$tag.log 2>&1
  echo "$tag rc $? at $((SECONDS - t0)) s"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/$tag.log | head -8
}
suite cuda_ops_test 200 cuda_ops_test
suite cuda_batch_invariance_test 60 cuda_batch_invariance_test
suite cuda_model_test 60 cuda_model_test
suite cuda_v41_test 60 cuda_v41_test
wait $mk; echo "make rc $? at $((SECONDS - t0)) s"
timeout 60 $B/deepinfer bench forward --device cuda --model /tmp/m8 --batch-sizes 1,32,128 \
  --context 4096 --steps 8 --phase-times --output-json $OUT/bench_main.json > $OUT/bench_main.log 2>&1
echo "bench rc $? at $((SECONDS - t0)) s"; grep -E '^\| (prefill|decode)|chunks of' $OUT/bench_main.log
timeout 60 $B/deepinfer bench latency --device cuda --model /tmp/m8 --batch-size 1 --input-len 4096 \
  --output-len 8 --no-isolated --output-json $OUT/lat_4k.json > $OUT/lat_4k.log 2>&1
echo "latency rc $? at $((SECONDS - t0)) s"; grep -iE 'ttft|itl|budget' $OUT/lat_4k.log | head -5
left 400 && suite cuda_runner_test 150 cuda_runner_test
left 480 && suite cuda_engine_test 60 cuda_engine_test
left 500 && suite speculative_decoding_test 90 spec_inv DEEPINFER_TEST_DEVICE=cuda DEEPINFER_BATCH_INVARIANT=1 \
  GTEST_FILTER='SpeculativeDecoding.Greedy*:SpeculativeDecoding.Seeded*:SpeculativeDecoding.MtpDrafts*'
echo "done at $((SECONDS - t0)) s"
tar -czf $R/g12.tgz -C /tmp g12

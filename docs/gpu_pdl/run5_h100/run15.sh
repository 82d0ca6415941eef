#!/usr/bin/env bash
# Device call 15: the shared expert on its own stream beside the routed experts up to 128 tokens
# (fork and join by events; graphs capture them as parallel branches): op tests, invariance,
# goldens, the runner and engine suites, then bench forward of main, serial (old) and overlapall.
set -u
R=$OUT
export OUT=/tmp/g15; mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
export VARIANTS_BEFORE=100000
mkdir -p .carry/bin && tar -xJf .carry/bin.tar.xz -C .carry && tar -xJf .carry/variants.tar.xz -C .carry/bin
mkdir -p .carry/shared && tar -xJf .carry/golden_v41.tar.xz -C .carry/shared
B=.carry/bin
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
source scripts/gpu_libs.sh $B/deepinfer $B/cuda_ops_test
t0=$SECONDS
left() { [ $((SECONDS - t0)) -lt $1 ]; }
( time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer ) > $OUT/make_m8.log 2>&1 &
mk=$!
suite() {  # binary timeout tag [gtest filter]
  timeout $2 $B/$1 --gtest_color=no ${4:+--gtest_filter=$4} > $OUT/$3.log 2>&1
  echo "$3 rc $? at $((SECONDS - t0)) s"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/$3.log | head -8
}
suite cuda_ops_test 200 cuda_ops_test 'CudaMoe.*:CudaLaunch.*'
suite cuda_batch_invariance_test 60 cuda_batch_invariance_test
suite cuda_model_test 60 cuda_model_test
suite cuda_v41_test 60 cuda_v41_test
wait $mk; echo "make rc $? at $((SECONDS - t0)) s"
bench() {  # name binary
  timeout 60 $2 bench forward --device cuda --model /tmp/m8 --batch-sizes 1,32,128 \
    --context 4096 --steps 8 --phase-times --output-json $OUT/bench_$1.json > $OUT/bench_$1.log 2>&1
  echo "bench $1 rc $? at $((SECONDS - t0)) s"
  grep -E '^\| (prefill|decode)|moe: experts|compressors|indexer' $OUT/bench_$1.log | grep -v "^ .*prefill" | head -16
}
bench main $B/deepinfer
for v in serial overlapall; do left 420 && bench $v $B/deepinfer_$v; done
left 450 && bench main2 $B/deepinfer
left 330 && suite cuda_runner_test 150 cuda_runner_test
left 480 && suite cuda_engine_test 60 cuda_engine_test
echo "done at $((SECONDS - t0)) s"
tar -czf $R/g15.tgz -C /tmp g15

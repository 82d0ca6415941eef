#!/usr/bin/env bash
# The device check for branch gpu-next-w4-mhc-invariance (written 2026-12-05; no GPU was lent
# after it was built): the pair-shift W4A16 expert kernel, mHC's warp Sinkhorn and multi-token
# mixes, GEMV lanes fetching ahead, the grouped output GEMV, and batch invariance on CUDA.
# Runs the CUDA suites that cover them, then bench forward (default, then --batch-invariant).
# Carry (run with carry [".carry"]): .carry/bin.tar.xz holding bin/{deepinfer, cuda_ops_test,
# cuda_batch_invariance_test, cuda_model_test, cuda_runner_test} (stripped), optionally
# bin/deepinfer_lb1 (a build with W4_MIN_BLOCKS=1 and grouped_mma_min_tokens 1, to compare),
# .carry/gpu_libs.tar.xz, .carry/shared/{golden_v41,conformance}. About 480 s of device time.
set -uo pipefail
[ -f .carry/bin.tar.xz ] && mkdir -p .carry/bin && tar -xJf .carry/bin.tar.xz -C .carry
B=.carry/bin
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
source scripts/gpu_libs.sh $B/deepinfer $B/cuda_runner_test $B/cuda_batch_invariance_test
t0=$SECONDS
left() { [ $((SECONDS - t0)) -lt $1 ]; }
(time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer) > $OUT/make_m8.log 2>&1 &
mk=$!
run_test() {  # binary timeout
  timeout $2 $B/$1 --gtest_color=no > $OUT/$1.log 2>&1; echo "$1 rc $? at $((SECONDS-t0)) s"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]|trials, |seed|differs first" $OUT/$1.log | head -8
}
run_test cuda_batch_invariance_test 120
run_test cuda_ops_test 100
wait $mk; echo "make rc $? at $((SECONDS-t0)) s"
run_bench() {  # name binary extra-flags
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 120 $B/$2 bench forward \
    --device cuda --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times \
    --output-json $OUT/bench_$1.json $3 > $OUT/bench_$1.log 2>&1
  echo "bench $1 rc $? at $((SECONDS-t0)) s"
  grep -E 'moe: experts|mhc|output projection|attention: projections|^\| (prefill|decode)' $OUT/bench_$1.log
}
run_bench main deepinfer ""
left 330 && run_bench invariant deepinfer --batch-invariant
left 380 && run_test cuda_model_test 80
left 420 && run_bench lb1 deepinfer_lb1 ""
left 440 && run_test cuda_runner_test 60
echo "done at $((SECONDS-t0)) s"

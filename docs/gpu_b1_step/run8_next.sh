#!/usr/bin/env bash
# Not yet run: the next call (either card). Before it, here:
#   .carry/base.tar.xz: run 7's main (dac3c55) stripped deepinfer as deepinfer_base (made from
#   .carry/bin.tar.xz before the repack below; the session that wrote this left it there)
#   VARIANT_TESTS="cuda_model_test cuda_batch_invariance_test cuda_v41_test" \
#     scripts/build_gpu_variants.sh build gm:GEMV_MMA=1 fws:FP8_WORD_SCALE=1
#   ninja -C build <pack_gpu_carry.sh's targets>; scripts/pack_gpu_carry.sh build
#   rm .carry/redis.tar.xz; cp docs/gpu_b1_step/run8_next.sh .carry/run8.sh
# 1. The checks run 7 had no time for, on the current defaults (SINK_MMA_MIN_QUERIES 16 since
#    run 6): V4 goldens, V4.1, batch invariance, the attention and mHC op tests.
# 2. The bench, base (dac3c55) then main: main adds the weights loaded before the PDL wait (hc_pre,
#    rms_norm, route), the FP8 scale index by shift (weight_rows) and split_merge's staged chunk
#    factors, all the same bits by construction; and the narrow W4 decode kernel's 8-row passes
#    (x_rows: no loads or permutes for the mma's zero rows 8..15; CudaMoe above checks it).
#    gm (GEMV_MMA=1): decode's FP8 projections on tensor cores (fp8_gemv_mma, about half the
#    instructions a weight byte of the CUDA-core GEMV by the SASS; other bits, so its goldens,
#    V4.1 and invariance tests run too, and CudaLinear.Fp8GemvMma* in main's ops forces it).
#    fws: FP8_WORD_SCALE=1. H200: main with transformers eager beside (issue 16's table).
# 3. ncu source-level profiles of the B=1 kernels still far from their floors: hc_pre_kernel<1>
#    (14 us a site, the Sinkhorn about 2.5 of it), fp8_gemv_mma_kernel (layer 0's 9) and
#    w4_kernel<1,1,1> (gate-up), then scores_mma, split_merge and route, each one launch of the
#    decode step, --set full, then the SASS with its stall samples (--page source) and the
#    details page.
# Logs go into one tar under $OUT, key lines to stdout.
set -u
t0=$SECONDS
L=/tmp/g8; mkdir -p $L
trap 'tar -cJf $OUT/g8.tar.xz -C /tmp g8' EXIT
mkdir -p .carry/bin && tar -xJf .carry/bin.tar.xz -C .carry && tar -xJf .carry/base.tar.xz -C .carry/bin
tar -xJf .carry/variants.tar.xz -C .carry/bin
mkdir -p .carry/shared && tar -xJf .carry/golden_v41.tar.xz -C .carry/shared
source scripts/gpu_libs.sh .carry/bin/deepinfer .carry/bin/cuda_ops_test
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
B=.carry/bin
nvidia-smi > $L/gpu.txt 2>&1
h200=0; grep -q H200 $L/gpu.txt && h200=1; echo "h200=$h200"; ncu --version | tail -1
(time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer) > $L/make_m8.log 2>&1 &
mk=$!
for tb in cuda_model_test cuda_v41_test cuda_batch_invariance_test cuda_model_test_gm \
          cuda_v41_test_gm cuda_batch_invariance_test_gm; do
  timeout 90 $B/$tb --gtest_color=no > $L/$tb.log 2>&1
  echo "$tb rc $? at $((SECONDS - t0))"; grep -E '^\[  (PASSED|FAILED)|trials|FAILED  \]' $L/$tb.log | head -6
done
GTEST_FILTER='CudaSinkAttention.*:CudaMhc.*:CudaDecode*:CudaLinear.*:CudaRouting.*:CudaRmsNorm.*:CudaNormRope.*:CudaMoe.*' timeout 200 $B/cuda_ops_test --gtest_color=no \
  > $L/ops.log 2>&1
echo "ops rc $? at $((SECONDS - t0))"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $L/ops.log | head -6
wait $mk; echo "make rc $? at $((SECONDS - t0))"
bench() {  # name binary timeout extra
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout ${3:-90} $2 bench forward \
    --device cuda --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times \
    ${4:-} --output-json $L/bench_$1.json > $L/bench_$1.log 2>&1
  echo "bench $1 rc $? at $((SECONDS - t0))"; grep -E '^\| (prefill|decode)' $L/bench_$1.log
}
bench base $B/deepinfer_base
bench main $B/deepinfer
bench gm $B/deepinfer_gm
GTEST_FILTER='CudaLinear.*' timeout 60 $B/ops_gm --gtest_color=no > $L/ops_gm.log 2>&1
echo "ops gm rc $? at $((SECONDS - t0))"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $L/ops_gm.log | head -6
# FP8_WORD_SCALE=1: one scale multiply a 16-byte FP8 word in the CUDA-core GEMV (other bits: the
# goldens
# would have to pass with it before it could be the default). Its GEMV op tests, less the
# streaming kernel's bit test (which keeps per-value scaling).
bench fws $B/deepinfer_fws
GTEST_FILTER='CudaLinear.*-CudaLinear.GemvStream*:CudaLinear.Fp8GemvMma*' timeout 60 $B/ops_fws --gtest_color=no \
  > $L/ops_fws.log 2>&1
echo "ops fws rc $? at $((SECONDS - t0))"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $L/ops_fws.log | head -6
[ $h200 = 1 ] && bench reference $B/deepinfer 200 "--reference transformers --reference-args=--load=dequant"
prof() {  # name kernel-regex launch-skip launch-count [binary]
  [ $((SECONDS - t0)) -lt 480 ] || return
  timeout 120 ncu --set full --import-source no --kernel-name-base demangled -k "regex:$2" \
    --launch-skip $3 --launch-count $4 -o $L/$1 -f \
    ${5:-$B/deepinfer} bench forward --device cuda --model /tmp/m8 --batch-sizes 1 --context 4096 \
    --steps 2 > $L/$1.out 2>&1
  echo "ncu $1 rc $? at $((SECONDS - t0))"
  ncu -i $L/$1.ncu-rep --page details > $L/$1_details.txt 2>&1
  ncu -i $L/$1.ncu-rep --page source --csv --print-source sass > $L/$1_sass.csv 2>&1
  rm -f $L/$1.ncu-rep
}
# hc_pre<1> and the GEMV run only in decode (prefill takes hc_pre<0> and the GEMMs): skip 40 of
# hc_pre's 16 a step; the FP8 GEMV's 67 a step (one step's first 9 hold layer 0's wq_a, wq_b,
# wkv, ...), here gm's tensor-core one.
prof hcpre 'hc_pre_kernel<(1|true)>' 40 1
prof gemv 'fp8_gemv_mma_kernel' 67 9 $B/deepinfer_gm
prof w4 'w4_kernel<(1|true), 1, 1>' 8 1
# Single-block or few-block decode kernels ncu put at 8-24 us each (run 7's capture).
prof scores 'scores_mma_kernel' 3 1
prof merge 'split_merge_kernel' 8 1
prof route 'route_kernel' 8 1

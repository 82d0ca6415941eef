#!/usr/bin/env bash
# Not yet run: the next two calls (either card; the second right after the first, on the warm
# machine). `bash .carry/run8.sh checks`, then `bash .carry/run8.sh speed`. Before them, here:
#   .carry/base.tar.xz: run 7's main (dac3c55) stripped deepinfer as deepinfer_base (made from
#   .carry/bin.tar.xz before the repack below; the session that wrote this left it there)
#   VARIANT_TESTS="cuda_model_test cuda_batch_invariance_test cuda_v41_test" \
#     scripts/build_gpu_variants.sh build gm:GEMV_MMA=1 w4g:W4_NARROW_GEMV=1 fws:FP8_WORD_SCALE=1
#   ninja -C build <pack_gpu_carry.sh's targets>; scripts/pack_gpu_carry.sh build
#   rm .carry/redis.tar.xz; cp docs/gpu_b1_step/run8_next.sh .carry/run8.sh
# What main adds since run 7 (dac3c55), all the same bits by construction: the weights loaded
# before the PDL wait (hc_pre, rms_norm, route), the FP8 scale index by shift (weight_rows),
# split_merge's staged chunk factors, and the narrow W4 kernel's 8-row passes (x_rows).
# The variants, each other bits than main (so their goldens, V4.1 and invariance tests run):
#   gm  (GEMV_MMA=1): decode's FP8 projections on tensor cores (gemm/fp8_gemv_mma.cu, about half
#       the instructions a weight byte of the CUDA-core GEMV by the SASS);
#   w4g (W4_NARROW_GEMV=1): decode's MXFP4 experts at up to 4 tokens in the same form
#       (moe/grouped_experts_w4_gemv.cu, about 4.7 instructions a weight byte against 11);
#   fws (FP8_WORD_SCALE=1): one scale multiply a 16-byte FP8 word in the CUDA-core GEMV.
# checks: main's goldens, V4.1, batch invariance, the op tests of what changed; gm's and w4g's
#   goldens and V4.1 (gm's invariance too), and gm's CudaLinear (main's ops force the new GEMV
#   in CudaLinear.Fp8GemvMma* and run the W4 GEMV form in CudaMoe's tensor-core form, whatever
#   the defaults). fws only if its bench wins.
# speed: the bench, base then main then each variant (H200: main with transformers eager beside,
#   issue 16's table); then ncu source-level profiles of the B=1 kernels still far from their
#   floors, one launch each (--set full, SASS with stall samples, the details page).
# Logs go into one tar under $OUT, key lines to stdout.
set -u
phase=${1:?usage: run8.sh checks|speed}
t0=$SECONDS
L=/tmp/g8_$phase; mkdir -p $L
trap 'tar -cJf $OUT/g8_$phase.tar.xz -C /tmp g8_$phase' EXIT
source scripts/gpu_carry_env.sh deepinfer cuda_ops_test
tar -xJf .carry/base.tar.xz -C $B  # dac3c55's deepinfer, as deepinfer_base
nvidia-smi > $L/gpu.txt 2>&1
h200=0; grep -q H200 $L/gpu.txt && h200=1; echo "h200=$h200"
ops() {  # log binary filter timeout
  GTEST_FILTER="$3" timeout $4 $2 --gtest_color=no > $L/$1.log 2>&1
  echo "$1 rc $? at $((SECONDS - t0))"; grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $L/$1.log | head -6
}

if [ $phase = checks ]; then
  for v in "" _gm _w4g; do
    for tb in cuda_model_test cuda_v41_test cuda_batch_invariance_test; do
      # w4g leaves batch-invariant mode's kernels as they are
      [ "$v$tb" = _w4gcuda_batch_invariance_test ] && continue
      timeout 90 $B/$tb$v --gtest_color=no > $L/$tb$v.log 2>&1
      echo "$tb$v rc $? at $((SECONDS - t0))"
      grep -E '^\[  (PASSED|FAILED)|trials|FAILED  \]' $L/$tb$v.log | head -6
    done
  done
  ops ops $B/cuda_ops_test 'CudaSinkAttention.*:CudaMhc.*:CudaDecode*:CudaLinear.*:CudaRouting.*:CudaRmsNorm.*:CudaNormRope.*:CudaMoe.*' 200
  ops ops_gm $B/ops_gm 'CudaLinear.*' 60
  exit 0
fi

[ -f /tmp/m8/config.json ] || (time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer) > $L/make_m8.log 2>&1
echo "model at $((SECONDS - t0))"; ncu --version | tail -1
bench() {  # name binary timeout extra
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout ${3:-90} $2 bench forward \
    --device cuda --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times \
    ${4:-} --output-json $L/bench_$1.json > $L/bench_$1.log 2>&1
  echo "bench $1 rc $? at $((SECONDS - t0))"; grep -E '^\| (prefill|decode)' $L/bench_$1.log
}
bench base $B/deepinfer_base
bench main $B/deepinfer
bench gm $B/deepinfer_gm
bench w4g $B/deepinfer_w4g
bench fws $B/deepinfer_fws
[ $h200 = 1 ] && bench reference $B/deepinfer 200 "--reference transformers --reference-args=--load=dequant"
# ncu reads no counters on the lent H200s (earlier sessions): profiles on an H100 only.
[ $h200 = 1 ] && exit 0
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
# hc_pre<1> and the GEMVs run only in decode (prefill takes hc_pre<0> and the GEMMs): skip 40 of
# hc_pre's 16 a step; the FP8 GEMV's 67 a step (one step's first 9 hold layer 0's wq_a, wq_b,
# wkv, ...), here gm's tensor-core one; w4g's experts (gate-up) likewise.
prof hcpre 'hc_pre_kernel<(1|true)>' 40 1
prof gemv 'fp8_gemv_mma_kernel' 67 9 $B/deepinfer_gm
prof w4g 'w4_gemv_kernel<(1|true)>' 8 1 $B/deepinfer_w4g
prof w4 'w4_kernel<(1|true), 1, 1>' 8 1
# Single-block or few-block decode kernels ncu put at 8-24 us each (run 7's capture).
prof scores 'scores_mma_kernel' 3 1
prof merge 'split_merge_kernel' 8 1
prof route 'route_kernel' 8 1

#!/usr/bin/env bash
# H200: issue 16's table beside transformers eager (REF=1): main's bench, then the reference, then
# batch invariance if time is left. Logs straight to $OUT, so a call cut short still returns them.
set -u
t0=$SECONDS
mkdir -p .carry/bin && tar -xJf .carry/bin.tar.xz -C .carry
source scripts/gpu_libs.sh .carry/bin/deepinfer .carry/bin/cuda_ops_test
B=.carry/bin
nvidia-smi > $OUT/gpu.txt 2>&1
(time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer) > $OUT/make_m8.log 2>&1
echo "make rc $? at $((SECONDS - t0))"
bench() {  # name binary timeout extra
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout ${3:-120} $2 bench forward --device cuda \
    --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times $4 \
    --output-json $OUT/bench_$1.json > $OUT/bench_$1.log 2>&1
  echo "bench $1 rc $? at $((SECONDS - t0))"; grep -E '^\| (prefill|decode)' $OUT/bench_$1.log
}
bench main $B/deepinfer 60 ""
[ "${REF:-0}" = 1 ] && bench reference $B/deepinfer 150 "--reference transformers --reference-args=--load=dequant"
if [ $((SECONDS - t0)) -lt 150 ]; then
  timeout 30 $B/cuda_batch_invariance_test --gtest_color=no > $OUT/inv.log 2>&1
  echo "invariance rc $? at $((SECONDS - t0))"; grep -E 'trials' $OUT/inv.log
fi

#!/usr/bin/env bash
# The device checks, one phase per call (each under 600 s; carry [".carry"]). What they cover:
#   - the pair-shift W4A16 expert kernel, mHC's warp Sinkhorn and multi-token mixes, GEMV lanes
#     fetching ahead, the grouped output GEMV (issue 16);
#   - sink attention on tensor cores (issue 16; sink_attention_mma.cu);
#   - batch invariance on CUDA (issue 19, acceptance 2), deterministic sampling through the engine
#     on CUDA (acceptance 3), and the prefix-cache torture test on the CUDA runner, bitwise under
#     batch invariance and near-tie-ruled without it (issue 18, acceptance 1).
#   - speculative rows and rollbacks on the CUDA runner (issue 19, acceptance 1): phase 4 runs the
#     runner's bitwise rollback test and the engine's oracle-drafter tests under batch
#     invariance, then bench's --spec-oracle-accept at B=1 and B=32; with it YOCO compact's
#     bitwise test. Phase 5: YOCO's prefill saving at 4k and 32k. Phase s: DSpark on the GPU and
#     the deferred replay (docs/gpu_dspark_check/, passing since 2026-12-05).
#   - V4.1 at real dims (issue 17): phase v (serve on cuda, v41-flash-8layer decode at B=1/32/128
#     beside the floors, YOCO at 4k and 32k) in one call; phases 6 and 7 the same in two.
#   - issue 16's decode kernels: phase p (every kernel of a decode step under ncu, H100 only:
#     ncu reads no counters on the H200's gVisor), k (the GEMVs' rows per pass: op tests,
#     invariance, goldens, bench before/after), f (a kernel change: OPS_FILTER's op tests,
#     invariance, both families' goldens, then w; NCU_ALL=1 adds every prefill kernel's duration,
#     NCU_KERNELS=REGEX ncu's full set on the first NCU_COUNT (3) launches of those kernels),
#     w (bench forward of the carried binary and of each deepinfer_<variant>), e (the
#     W4A16 expert kernels of a prefill under ncu), a (PDL on and off in one binary, decision
#     0022, with the touched kernels' op tests, invariance and goldens first).
# Usage: scripts/gpu_next_check.sh PHASE (1, 2, 3: issue 16's bench beside transformers eager,
# 4, 5, 6, 7, s, v, p, k, f, w, e, a, c: the correctness subset of 1 and 4, for a session with little
# time).
# OUT names the log folder; at most 8 files come back from the device, so tar it there.
# Build the carry here with scripts/pack_gpu_carry.sh BUILD_DIR; variants (one kernel constant
# changed each, benched and op-tested beside it) with scripts/build_gpu_variants.sh first.
set -uo pipefail
phase=${1:-1}
source scripts/gpu_carry_env.sh deepinfer cuda_ops_test prefix_cache_engine_test
OUT=${OUT:-gpu_logs}
mkdir -p "$OUT"
t0=$SECONDS
left() { [ $((SECONDS - t0)) -lt $1 ]; }
run_test() {  # binary timeout [env...] (GTEST_FILTER=... among them picks tests)
  local bin=$1 to=$2 tag=$1
  shift 2
  [ $# -gt 0 ] && tag="$bin.$(echo "$*" | sed 's/GTEST_FILTER=[^ ]*/filtered/' | tr ' =/' '___')"
  env "$@" timeout $to $B/$bin --gtest_color=no > $OUT/$tag.log 2>&1
  echo "$tag rc $? at $((SECONDS - t0)) s"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]|trials, |seed|differs first|engine test on|parts from" \
    $OUT/$tag.log | head -12
}
run_bench() {  # name extra-flags (BENCH_BIN: another deepinfer binary, e.g. the baseline's)
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout ${BENCH_TIMEOUT:-150} ${BENCH_BIN:-$B/deepinfer} \
    bench forward --device cuda --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 \
    --phase-times --output-json $OUT/bench_$1.json $2 > $OUT/bench_$1.log 2>&1
  echo "bench $1 rc $? at $((SECONDS - t0)) s"
  grep -E 'moe: experts|mhc|attention|output projection|^\| (prefill|decode)' $OUT/bench_$1.log
}
variants() {  # prefix (deepinfer, ops): the carried variants' binaries of that kind
  { ls .carry/$1_*.xz 2>/dev/null | xargs -rn1 basename | sed 's/\.xz$//'
    ls $B/$1_* 2>/dev/null | xargs -rn1 basename; } | sort -u
}
unpack() {  # NAME -> $B/NAME, executable
  [ -x $B/$1 ] || { xz -dc .carry/$1.xz > $B/$1 && chmod +x $B/$1; }
}
ops_variants() {  # filter: each ops_<v> variant's op tests
  for name in $(variants ops); do
    unpack $name && run_test $name 90 GTEST_FILTER="$1"
  done
}
bench_variants() {  # bench forward of the carried binary, then of each deepinfer_<v> variant
  run_bench main ""
  for name in $(variants deepinfer); do
    left ${VARIANTS_BEFORE:-100000} || break
    unpack $name && BENCH_BIN=$B/$name run_bench ${name#deepinfer_} ""
  done
}
make_m8() {  # the disk holds one 8-layer model: v41-flash-8layer goes first
  [ -f /tmp/m8/config.json ] && return
  rm -rf /tmp/m41
  (time $B/deepinfer make-tiny-model /tmp/m8 --preset v4-flash-8layer) > $OUT/make_m8.log 2>&1
}
# V4.1 at real dims (issue 17). v41-flash-8layer is about 60 GB, streamed in 2.6 minutes on the
# GPU machine; the disk (64 GiB) holds one 8-layer model, so v4-flash-8layer goes first.
make_m41() {
  [ -f /tmp/m41/config.json ] && return
  rm -rf /tmp/m8
  (time $B/deepinfer make-tiny-model /tmp/m41 --preset v41-flash-8layer) > $OUT/make_m41.log 2>&1
  echo "make m41 rc $? at $((SECONDS - t0)) s"
}
v41_decode() {  # start-before-s timeout: B=1, 32 at 4k context, 128 at 1k, beside the floors
  for b in 1 32 128; do
    left $1 || break
    local len=$([ $b -le 32 ] && echo 4096 || echo 1024)
    timeout $2 $B/deepinfer bench latency --device cuda --model /tmp/m41 --batch-size $b \
      --max-num-seqs $b --max-model-len 8192 --input-len $len --output-len 16 --no-isolated \
      --output-json $OUT/bench_v41_b$b.json > $OUT/bench_v41_b$b.log 2>&1
    echo "bench v41 B=$b rc $? at $((SECONDS - t0)) s"
    grep -iE 'itl|ttft|floor' $OUT/bench_v41_b$b.log | head -6
  done
}
v41_yoco() {  # start-before-s timeout: YOCO's saving, 4 prompts of 4k, then one of 32k
  for len in 4096 32768; do
    for mode in off compact; do
      left $1 || break
      local n=$([ $len = 4096 ] && echo 4 || echo 1)
      DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=$mode timeout $2 $B/deepinfer bench throughput \
        --device cuda --model /tmp/m41 --num-prompts $n --max-num-seqs 1 --input-len $len \
        --output-len 1 --no-isolated --output-json $OUT/bench_v41_yoco_${mode}_$len.json \
        > $OUT/bench_v41_yoco_${mode}_$len.log 2>&1
      echo "bench v41 yoco $mode $len rc $? at $((SECONDS - t0)) s"
      grep -iE 'ttft|forward' $OUT/bench_v41_yoco_${mode}_$len.log | head -3
    done
  done
}
v41_serve() {  # start-before-s timeout: deepinfer serve on a V4.1 checkpoint through the V4.1
  # recipe (thinking, a forced tool call) on the GPU; curl_shim.py stands in where the image has
  # no curl.
  if ! command -v curl >/dev/null; then
    mkdir -p /tmp/shim && ln -sf "$PWD/scripts/curl_shim.py" /tmp/shim/curl
    export PATH=/tmp/shim:$PATH
  fi
  left $1 && timeout $2 bash tests/cli/serve_v41_smoke.sh $B/deepinfer --device cuda \
    > $OUT/serve_v41_smoke_cuda.log 2>&1
  echo "serve v41 smoke on cuda rc $? at $((SECONDS - t0)) s"; tail -2 $OUT/serve_v41_smoke_cuda.log
}
if [ "$phase" = 1 ]; then
  make_m8 &
  mk=$!
  run_test cuda_ops_test 150
  run_test cuda_batch_invariance_test 120
  wait $mk
  echo "make rc $? at $((SECONDS - t0)) s"
  run_bench main ""
  left 420 && run_bench invariant --batch-invariant
  left 480 && run_test cuda_model_test 80
  echo "phase 1 done at $((SECONDS - t0)) s"
elif [ "$phase" = c ]; then
  # Correctness first, when device time is short: the op tests, batch invariance (both
  # families), the runner's speculative/YOCO/MTP tests, the engine's speculative tests on cuda.
  run_test cuda_ops_test 150
  left 300 && run_test cuda_batch_invariance_test 150
  left 400 && run_test cuda_runner_test 100 GTEST_FILTER='CudaSpeculativeRows.*:CudaYoco.*:CudaMtp.*'
  left 420 && run_test speculative_decoding_test 170 DEEPINFER_TEST_DEVICE=cuda \
    DEEPINFER_BATCH_INVARIANT=1 \
    GTEST_FILTER='SpeculativeDecoding.Greedy*:SpeculativeDecoding.Seeded*:SpeculativeDecoding.MtpDrafts*'
  left 520 && run_test cuda_model_test 60
  echo "phase c done at $((SECONDS - t0)) s"
elif [ "$phase" = q ]; then
  # The quickest look, for a few minutes of device time: the runner's new tests, the op tests,
  # batch invariance.
  run_test cuda_runner_test 90 GTEST_FILTER='CudaSpeculativeRows.*:CudaYoco.*:CudaMtp.*'
  run_test cuda_ops_test 150
  left 200 && run_test cuda_batch_invariance_test 150
  echo "phase q done at $((SECONDS - t0)) s"
elif [ "$phase" = 4 ]; then
  # Speculative decoding on the CUDA runner: bitwise only under batch invariance.
  make_m8 &
  mk=$!
  run_test cuda_runner_test 150 GTEST_FILTER='CudaSpeculativeRows.*:CudaYoco.*:CudaMtp.*'
  run_test speculative_decoding_test 240 DEEPINFER_TEST_DEVICE=cuda DEEPINFER_BATCH_INVARIANT=1 \
    GTEST_FILTER='SpeculativeDecoding.Greedy*:SpeculativeDecoding.Small*:SpeculativeDecoding.Seeded*:SpeculativeDecoding.Grammar*:SpeculativeDecoding.MtpDrafts*'
  wait $mk
  for b in 1 32; do
    left 480 || break
    # Without batch invariance, as served (its weight GEMVs would read the weights once per 8
    # verification rows); the tests above hold the bits under it.
    timeout 120 $B/deepinfer bench throughput --device cuda \
      --model /tmp/m8 --num-prompts $b --max-num-seqs $b --input-len 512 --output-len 64 \
      --spec-oracle-accept 0.6,0.8 --no-isolated --output-json $OUT/bench_spec_b$b.json > $OUT/bench_spec_b$b.log 2>&1
    echo "bench spec B=$b rc $? at $((SECONDS - t0)) s"
    grep -E '^\| (off|0\.)' $OUT/bench_spec_b$b.log
  done
  echo "phase 4 done at $((SECONDS - t0)) s"
elif [ "$phase" = 5 ]; then
  # YOCO compact on the GPU: 4 prefills of 4k and of 32k tokens, truncation off and on.
  make_m8
  for len in 4096 32768; do
    for mode in off compact; do
      left 540 || break
      DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=$mode timeout 150 $B/deepinfer bench throughput \
        --device cuda --model /tmp/m8 --num-prompts 4 --max-num-seqs 1 --input-len $len \
        --output-len 1 --no-isolated --output-json $OUT/bench_yoco_${mode}_$len.json \
        > $OUT/bench_yoco_${mode}_$len.log 2>&1
      echo "bench yoco $mode $len rc $? at $((SECONDS - t0)) s"
      grep -iE 'ttft|wall|output tok' $OUT/bench_yoco_${mode}_$len.log | head -4
    done
  done
  echo "phase 5 done at $((SECONDS - t0)) s"
elif [ "$phase" = 6 ]; then
  # V4.1 at real dims (issue 17): make v41-flash-8layer, prefills of 4k and 32k with YOCO off and
  # compact, and serve on the GPU. Phase 7 follows on the same warm machine.
  make_m41
  v41_yoco 400 100
  v41_serve 560 120
  echo "phase 6 done at $((SECONDS - t0)) s"
elif [ "$phase" = 7 ]; then
  # V4.1 decode at B=1, 32 and 128 and prefill 4k beside roofline_v41.h's floors (issue 17
  # acceptance 5), on the machine phase 6 left warm (it holds /tmp/m41).
  make_m41
  v41_decode 480 110
  echo "phase 7 done at $((SECONDS - t0)) s"
elif [ "$phase" = v ]; then
  # Issue 17 in one call, for a session with ten minutes left: serve on the GPU (tiny V4.1), then
  # v41-flash-8layer's decode beside its floors, then YOCO's prefill saving at 4k (and 32k if
  # time is left).
  v41_serve 60 90
  make_m41
  v41_decode 470 90
  v41_yoco 520 70
  echo "phase v done at $((SECONDS - t0)) s"
elif [ "$phase" = k ]; then
  # Issue 16, decode's CUDA-core GEMVs (weight_gemv, the grouped experts below 8 tokens) with rows
  # per pass by the batch and two columns a warp: the op tests, batch invariance, the goldens,
  # then bench forward with the binary from before the change (.carry/deepinfer_base.xz, when
  # carried) and after, on the same machine.
  make_m8 &
  mk=$!
  run_test cuda_ops_test 150
  run_test cuda_batch_invariance_test 120
  run_test cuda_model_test 80
  wait $mk
  if [ -f .carry/deepinfer_base.xz ]; then
    xz -dc .carry/deepinfer_base.xz > /tmp/deepinfer_base && chmod +x /tmp/deepinfer_base
    BENCH_BIN=/tmp/deepinfer_base run_bench base ""
  fi
  run_bench main ""
  echo "phase k done at $((SECONDS - t0)) s"
elif [ "$phase" = w ]; then
  # A/B of build variants (issue 16): bench forward of the carried binary, then of every
  # deepinfer_<variant> (a deepinfer built with one constant changed), same machine.
  make_m8
  bench_variants
  echo "phase w done at $((SECONDS - t0)) s"
elif [ "$phase" = f ]; then
  # A kernel change checked and timed in one call: its op tests (OPS_FILTER, for the carried
  # binary and each ops_<variant>), batch invariance, the goldens (V4's, and V4.1's where
  # .carry/shared/golden_v41 came along), then phase w's bench of the carried binary and its
  # variants (deepinfer_mainline: main's, the baseline).
  make_m8 &
  mk=$!
  filter=${OPS_FILTER:-CudaSinkAttention.*}
  run_test cuda_ops_test 150 GTEST_FILTER="$filter"
  ops_variants "$filter"
  run_test cuda_batch_invariance_test 60
  run_test cuda_model_test 60
  [ -d .carry/shared/golden_v41 ] && run_test cuda_v41_test 120
  wait $mk
  bench_variants
  if [ -n "${NCU_ALL:-}" ] && left 330; then  # every kernel's duration in a 4k prefill (H100)
    timeout 240 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
      --csv --page raw $B/deepinfer bench forward --device cuda --model /tmp/m8 --batch-sizes 1 \
      --context 4096 --steps 1 > $OUT/ncu_prefill.csv 2> $OUT/ncu_prefill.err
    echo "ncu prefill rc $? at $((SECONDS - t0)) s: $(wc -l < $OUT/ncu_prefill.csv) lines"
  fi
  if [ -n "${NCU_KERNELS:-}" ] && left 400; then  # ncu's full set on the first prefill launch each
    timeout 150 ncu --clock-control none --set full -k "regex:$NCU_KERNELS" -c ${NCU_COUNT:-3} \
      $B/deepinfer bench forward --device cuda --model /tmp/m8 --batch-sizes 1 --context 4096 \
      --steps 1 > $OUT/ncu_kernels_full.txt 2> $OUT/ncu_kernels_full.err
    echo "ncu full ($NCU_KERNELS) rc $? at $((SECONDS - t0)) s"
    grep -E -e "^  [a-z_].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occ" \
      -e "Registers Per|Issue Slots Busy|Local Memory|L2 Hit|Theoretical Occ" \
      $OUT/ncu_kernels_full.txt | head -60
  fi
  echo "phase f done at $((SECONDS - t0)) s"
elif [ "$phase" = p ]; then
  # Issue 16's kernels one by one: ncu's duration of every launch (graph nodes included) of a
  # decode at B=1 and B=128 and a 4k prefill on v4-flash-8layer, as CSV to split by step here.
  make_m8
  for b in ${NCU_BATCHES:-1 128}; do  # NCU_CACHE=none: warm caches, as in a graph replay
    left 420 || break
    timeout 200 ncu --clock-control none --cache-control ${NCU_CACHE:-all} \
      --metrics gpu__time_duration.sum --csv --page raw \
      $B/deepinfer bench forward --device cuda --model /tmp/m8 --batch-sizes $b --context 4096 \
      --steps 2 > $OUT/ncu_b$b.csv 2> $OUT/ncu_b$b.err
    echo "ncu B=$b rc $? at $((SECONDS - t0)) s: $(wc -l < $OUT/ncu_b$b.csv) lines"
    tail -3 $OUT/ncu_b$b.err
  done
  echo "phase p done at $((SECONDS - t0)) s"
elif [ "$phase" = e ]; then
  # The W4A16 expert kernels of a 4k prefill under ncu (H100 only): every launch's duration
  # (which layers are slow says whether routing skew or the kernel itself costs), then the full
  # section set (throughputs, occupancy, stall reasons) of the first gate-up and down launches.
  # NCU_BASE: a deepinfer_<v> variant whose launches' durations to take instead of the carried
  # binary's; then op tests, invariance and goldens, and phase w's benches.
  make_m8 &
  mk=$!
  filter=${OPS_FILTER:-CudaMoe*}
  run_test cuda_ops_test 90 GTEST_FILTER="$filter"
  ops_variants "$filter"
  run_test cuda_batch_invariance_test 60
  wait $mk
  nb=$B/deepinfer
  [ -n "${NCU_BASE:-}" ] && unpack deepinfer_$NCU_BASE && nb=$B/deepinfer_$NCU_BASE
  timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum,launch__grid_size --csv \
    --page raw -k regex:w4_kernel -c 64 $nb bench forward --device cuda --model /tmp/m8 \
    --batch-sizes 1 --context 4096 --steps 1 \
    > $OUT/ncu_w4_durations.csv 2> $OUT/ncu_w4_durations.err
  echo "ncu durations rc $? at $((SECONDS - t0)) s: $(wc -l < $OUT/ncu_w4_durations.csv) lines"
  timeout 300 ncu --clock-control none --set full -k regex:w4_kernel --launch-skip ${NCU_SKIP:-8} \
    -c 2 $B/deepinfer bench forward --device cuda --model /tmp/m8 --batch-sizes 1 --context 4096 \
    --steps 1 > $OUT/ncu_w4_full.txt 2> $OUT/ncu_w4_full.err
  echo "ncu full rc $? at $((SECONDS - t0)) s"
  grep -E -e "Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy" \
    -e "Registers Per|Issue Slots Busy|Executed Ipc A|Block Limit" $OUT/ncu_w4_full.txt | head -30
  run_test cuda_model_test 60
  bench_variants
  echo "phase e done at $((SECONDS - t0)) s"
elif [ "$phase" = 3 ]; then
  # Issue 16's table: ours, then transformers eager on the same GPU in the same run.
  make_m8
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 540 $B/deepinfer bench forward \
    --device cuda --model /tmp/m8 --batch-sizes 1,32,128 --context 4096 --steps 8 --phase-times \
    --reference transformers --reference-args '--load dequant' \
    --output-json $OUT/bench_reference.json > $OUT/bench_reference.log 2>&1
  echo "bench reference rc $? at $((SECONDS - t0)) s"
  grep -E '^\| (prefill|decode)|transformers' $OUT/bench_reference.log | head -20
elif [ "$phase" = t ]; then
  # The torture and speculative tests after their small-pool fix (the CUDA runner's pool must
  # hold one --max-model-len sequence), then the oracle speed-up under batch invariance, where
  # verification rows round as decode rows do and the oracle's continuation stays the target's.
  make_m8 &
  mk=$!
  run_test prefix_cache_engine_test 150 DEEPINFER_TEST_DEVICE=cuda DEEPINFER_BATCH_INVARIANT=1
  run_test prefix_cache_engine_test 120 DEEPINFER_TEST_DEVICE=cuda
  run_test speculative_decoding_test 120 DEEPINFER_TEST_DEVICE=cuda DEEPINFER_BATCH_INVARIANT=1
  wait $mk
  for b in 1 32; do
    left 330 || break
    timeout 110 $B/deepinfer bench throughput --device cuda --batch-invariant \
      --model /tmp/m8 --num-prompts $b --max-num-seqs $b --input-len 512 --output-len 64 \
      --spec-oracle-accept 0,0.6,1 --no-isolated --output-json $OUT/bench_spec_inv_b$b.json \
      > $OUT/bench_spec_inv_b$b.log 2>&1
    echo "bench spec invariant B=$b rc $? at $((SECONDS - t0)) s"
    grep -E '^\| (off|[01]\.)|ITL' $OUT/bench_spec_inv_b$b.log
  done
  echo "phase t done at $((SECONDS - t0)) s"
elif [ "$phase" = s ]; then
  # The deferred rollback replay (decision 0017, built without a GPU): the runner's rollback
  # tests (tiny models, then v4-flash-8layer), the engine's speculative suite under batch
  # invariance, then the oracle bench at B=1 and 32 against docs/gpu_spec_invariance_fix/.
  # First the V4.1 suite with the DSpark drafter against the CPU's (cuda_dspark_test.cc, built
  # without a GPU) and the attention refactor it rests on.
  make_m8 &
  mk=$!
  run_test cuda_v41_test 120
  # DSpark through the engine on the CUDA runner (dspark_tracks.h): 64 mixed requests, forks,
  # cached prefixes, preemption, bit for bit against the switch off, under batch invariance.
  run_test dspark_speculative_test 150 DEEPINFER_TEST_DEVICE=cuda DEEPINFER_BATCH_INVARIANT=1
  run_test cuda_runner_test 120 GTEST_FILTER='CudaSpeculativeRows.*:CudaYoco.*:CudaMtp.*'
  run_test speculative_decoding_test 150 DEEPINFER_TEST_DEVICE=cuda DEEPINFER_BATCH_INVARIANT=1
  wait $mk
  left 330 && run_test cuda_runner_test 120 GTEST_FILTER='CudaSpeculativeRows.DeepseekV4Roll*' \
    DEEPINFER_SPEC_ROWS_MODEL=/tmp/m8 DEEPINFER_SPEC_ROWS_MAX_MODEL_LEN=256
  for b in 1 32; do
    left 360 || break
    timeout $([ $b = 1 ] && echo 150 || echo 240) $B/deepinfer bench throughput --device cuda --batch-invariant \
      --model /tmp/m8 --num-prompts $b --max-num-seqs $b --input-len 512 --output-len 64 \
      --spec-oracle-accept 0,0.6,0.8,1 --no-isolated --output-json $OUT/bench_spec_inv_b$b.json \
      > $OUT/bench_spec_inv_b$b.log 2>&1
    echo "bench spec invariant B=$b rc $? at $((SECONDS - t0)) s"
    grep -E '^\| (off|[01]\.)|part' $OUT/bench_spec_inv_b$b.log
  done
  echo "phase s done at $((SECONDS - t0)) s"
elif [ "$phase" = d ]; then
  # Where v4-flash-8layer's speculative rows part from plain decoding under batch invariance:
  # a decode step vs one- and five-token forwards from the same state (cuda_model_test's paths
  # test, which names the first layer whose decisions differ), tiny model then v4-flash-8layer.
  make_m8 &
  mk=$!
  run_test cuda_model_test 60 GTEST_FILTER='CudaModelPathsTest.*'
  wait $mk
  run_test cuda_model_test 120 GTEST_FILTER='CudaModelPathsTest.*' DEEPINFER_PATHS_MODEL=/tmp/m8
  grep -E "^position|paths:|^after" $OUT/cuda_model_test.*.log | sed 's/.*log://' | head -20
  # Then the runner's speculative rows and batch invariance on that model.
  run_test cuda_runner_test 120 GTEST_FILTER='CudaSpeculativeRows.DeepseekV4Roll*' \
    DEEPINFER_SPEC_ROWS_MODEL=/tmp/m8 DEEPINFER_SPEC_ROWS_MAX_MODEL_LEN=256
  left 300 && run_test cuda_batch_invariance_test 150 GTEST_FILTER='*/0' \
    DEEPINFER_INVARIANCE_MODEL=/tmp/m8 DEEPINFER_INVARIANCE_MAX_MODEL_LEN=160 \
    DEEPINFER_INVARIANCE_TRIALS=20
  left 400 && run_test cuda_runner_test 100 GTEST_FILTER='CudaSpeculativeRows.*:CudaYoco.*:CudaMtp.*'
  echo "phase d done at $((SECONDS - t0)) s"
elif [ "$phase" = a ]; then
  # PDL and decode's latency kernels (decision 0022), checked and timed in one call: the touched
  # kernels' op tests, batch invariance and both families' goldens with PDL on, then bench
  # forward of the carried binary with DEEPINFER_PDL=0 and 1, twice each in turn (same binary,
  # same machine), then each deepinfer_<variant> (phase w's bench_variants); then, time left,
  # each ops_<variant> runs the same op tests.
  make_m8 &
  mk=$!
  $B/pdl_chain_bench > $OUT/pdl_chain_bench.log 2>&1; cat $OUT/pdl_chain_bench.log
  filter=${OPS_FILTER:-CudaLaunch.*:CudaMhc.*:CudaRmsNorm*:CudaDecodeCompressor*:CudaLinear.*:CudaMoe.*:CudaIndexer.*}
  run_test cuda_ops_test 150 GTEST_FILTER="$filter"
  run_test cuda_batch_invariance_test 60
  run_test cuda_model_test 60
  [ -d .carry/shared/golden_v41 ] && run_test cuda_v41_test 120
  wait $mk
  for p in 0 1 0 1; do
    left 420 && DEEPINFER_PDL=$p run_bench pdl${p}_$SECONDS ""
  done
  left 420 && VARIANTS_BEFORE=460 bench_variants
  left 470 && ops_variants "$filter"
  echo "phase a done at $((SECONDS - t0)) s"
elif [ "$phase" = b ]; then
  # Bisecting the v4-flash-8layer speculative parting under batch invariance (phase t): batch
  # invariance on that model at a short and the default runner length, then the oracle run at
  # acceptance 0 (it prints where the outputs first part), then the speculative suite.
  make_m8
  for len in 256 65536; do  # verification rows and rollbacks against plain decoding
    run_test cuda_runner_test 120 GTEST_FILTER='CudaSpeculativeRows.DeepseekV4*' \
      DEEPINFER_SPEC_ROWS_MODEL=/tmp/m8 DEEPINFER_SPEC_ROWS_MAX_MODEL_LEN=$len
  done
  for len in 160 65536; do
    run_test cuda_batch_invariance_test 150 GTEST_FILTER='*/0' \
      DEEPINFER_INVARIANCE_MODEL=/tmp/m8 DEEPINFER_INVARIANCE_MAX_MODEL_LEN=$len \
      DEEPINFER_INVARIANCE_TRIALS=10
    mv $OUT/cuda_batch_invariance_test.filtered_*_MAX_MODEL_LEN_${len}_*.log \
      $OUT/invariance_m8_len$len.log 2>/dev/null
  done
  left 420 && timeout 120 $B/deepinfer bench throughput --device cuda --batch-invariant \
    --model /tmp/m8 --num-prompts 1 --max-num-seqs 1 --input-len 512 --output-len 64 \
    --spec-oracle-accept 0,0.6,1 --no-isolated > $OUT/bench_spec_inv_b1.log 2>&1
  grep -E '^\| (off|[01]\.)|part' $OUT/bench_spec_inv_b1.log
  left 500 && run_test speculative_decoding_test 90 DEEPINFER_TEST_DEVICE=cuda \
    DEEPINFER_BATCH_INVARIANT=1
  echo "phase b done at $((SECONDS - t0)) s"
else
  run_test prefix_cache_engine_test 200 DEEPINFER_TEST_DEVICE=cuda DEEPINFER_BATCH_INVARIANT=1
  run_test deterministic_sampling_test 60 DEEPINFER_TEST_DEVICE=cuda DEEPINFER_BATCH_INVARIANT=1
  run_test prefix_cache_engine_test 150 DEEPINFER_TEST_DEVICE=cuda
  left 380 && run_test cuda_runner_test 200
  left 460 && run_test cuda_engine_test 100
  echo "phase 2 done at $((SECONDS - t0)) s"
fi

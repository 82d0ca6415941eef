#!/usr/bin/env bash
# Builds and runs every test suite; this is the command README.md shows and CI runs.
#   1. release build: the golden/integration, CLI smoke, e2e and Python suites, and the
#      unit-labelled suites that step 2 leaves out (every suite when step 2 is skipped; with
#      step 2, only the unit test programs of RELEASE_TARGETS are built here);
#   2. ASan+UBSan build: the unit-labelled suites, less some model-level ones (see below);
#   3. the libFuzzer targets (safetensors header, OpenAI request mapping, HTTP request reader)
#      for bounded times (scripts/run_fuzz.sh: FUZZ_SECONDS 12, OPENAI_FUZZ_SECONDS 6,
#      HTTP_FUZZ_SECONDS 6 here; run it alone for longer campaigns).
# DEEPINFER_SKIP_ASAN=1 / DEEPINFER_SKIP_FUZZ=1 skip steps 2 / 3 for quick local runs.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's elapsed time, so a CI log shows where its time goes (the budget is 40 minutes).
phase() { echo "== test.sh: $1 done at ${SECONDS} s"; }
# Unit-labelled suites that run in the release tree only (why: the comment in step 2).
RELEASE_ONLY='YocoTruncation\.|DeterministicSampling\.|OneSequencesLogitsAreTheSameBits|SpeculativeRows\.DeepseekV41|BatchMatchesAloneForEveryChunkBudget|TinyModelV41Forward\.FiniteLogitsAndBitwisePathIndependence|SpeculativeDecoding\.(Mtp|Seeded|GrammarConstrained)|V41Dspark\.(DraftsAreDeterministic|TapsChangeNoLogit)|DsparkDrafting\.RollbacksAtEveryDraftPositionKeepTheDrafterState|GrammarMatcher\.(LongCountedStringsShareMasksExactly|TextFastPathMaskEqualsBruteForce)|DsparkSpeculativeDecoding\.(PreemptionKeepsOutputs|ForksAndCachedPrefixesKeepOutputs)|ExpertParallel\.(WithoutTwoBatchOverlap|FourRanksGiveOneRanksLogitsAndTokensV4)|Disaggregation\.ExportThenImportGivesOneEnginesTokensV4$|ExpertParallelEplb\.TwoAndThreeRanksWithReplicasGiveOneRanksLogitsV4$|PrefixCacheTorture\.(LargePool|PreemptedSequences|RestartOver|AFullDisk|V41Matches)|cli_tokenizer_recipe_conformance'
# The unit test programs that hold RELEASE_ONLY's cases: the release tree builds only these of
# its unit test programs when the sanitizer tree runs the rest (a check after the sanitizer build
# fails if a RELEASE_ONLY case lives elsewhere).
RELEASE_TARGETS=(deterministic_sampling_test disaggregation_test dspark_speculative_test
  engine_test grammar_test model_expert_parallel_test model_v41_dspark_test
  model_v41_tiny_model_test prefix_cache_engine_test runtime_test speculative_decoding_test
  yoco_truncation_test)
if [ "${DEEPINFER_SKIP_ASAN:-0}" != 1 ]; then
  DEEPINFER_UNIT_TESTS_IN_ALL=OFF ./build.sh release
  cmake --build --preset release --target "${RELEASE_TARGETS[@]}"
else
  ./build.sh release
fi
phase "release build"
if [ "${DEEPINFER_SKIP_ASAN:-0}" != 1 ]; then
  # The sanitizer tree runs every other unit-labelled suite, and running them here too cost about
  # a third of this step: each suite runs once, in the stricter tree. The programs left unbuilt
  # show up as <target>_NOT_BUILT placeholders, which have no label.
  ctest --preset release -LE unit -E '_NOT_BUILT$'
  ctest --preset release -L unit -R "$RELEASE_ONLY"
else
  ctest --preset release
fi
phase "release tests"
if [ "${DEEPINFER_SKIP_ASAN:-0}" != 1 ]; then
  ./build.sh asan
  phase "asan build"
  # Each RELEASE_ONLY case the sanitizer tree lists ran above, in a program of RELEASE_TARGETS.
  release_only_cases() {
    ctest --preset "$1" -N -L unit -R "$RELEASE_ONLY" | sed -n 's/^ *Test *#[0-9]*: //p' | sort
  }
  unrun=$(comm -23 <(release_only_cases asan) <(release_only_cases release))
  if [ -n "$unrun" ]; then
    echo "test.sh: these RELEASE_ONLY cases ran in neither tree; add their programs to" \
      "RELEASE_TARGETS:" >&2
    echo "$unrun" >&2
    exit 1
  fi
  # The model-level suites that only re-check arithmetic on paths the other ASan suites already
  # run (YOCO truncation, 100 batch compositions, 20 seq_seed runs, V4.1 rollbacks, the chunk
  # budget sweep, V4.1 path independence, three speculative decoding cases whose engine paths
  # the other two cover, the DSpark drafter's chunking and taps re-runs, DSpark under preemption
  # (a preempted sequence's drafter state is only dropped; the V4 small-pool case keeps the
  # engine's preemption under speculation here), DSpark over forks and cached prefixes (their
  # engine paths run here without drafts; MixedBatch keeps DSpark's), the serial expert-parallel
  # exchange re-run (AnIdleRankKeepsTheOthersGoing takes it here), V4 over four ranks (V4.1's
  # two-and-four-ranks case keeps the four-rank exchange), the V4 twins of the disaggregation
  # export/import and EPLB replica cases (their V4.1 twins take the same engine paths), the
  # DSpark drafter's rollback at every draft position (MixedBatch rolls it back here), and two
  # grammar cases that re-check masks against brute force or across long counted strings (the
  # other matcher cases run its memory paths)) cost ~9 min under ASan, and five of the nine
  # prefix-cache torture cases another ~90 s (their paths are the four kept: eviction and
  # preemption, the host tier, corrupt disk units, Redis faults): they run in the release tree
  # above only (CI time). The sanitizer tree does
  # not build the deepinfer binary (its CLI objects cost ~2 min), so the CLI's tokenize/recipe
  # conformance script runs in the release tree only; the tokenizer and recipe libraries' own
  # suites still run here.
  ASAN_OPTIONS=detect_leaks=1 ctest --preset asan -L unit -E "$RELEASE_ONLY"
  phase "asan tests"
fi
if [ "${DEEPINFER_SKIP_FUZZ:-0}" != 1 ]; then
  FUZZ_SECONDS=${FUZZ_SECONDS:-12} OPENAI_FUZZ_SECONDS=${OPENAI_FUZZ_SECONDS:-6} \
    HTTP_FUZZ_SECONDS=${HTTP_FUZZ_SECONDS:-6} scripts/run_fuzz.sh
  phase "fuzzing"
fi

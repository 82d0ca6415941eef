#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (in build-fuzz/) and runs each for a bounded time over
# its committed seed corpus: the safetensors header parser, then the OpenAI request mapping.
# Exits non-zero if a fuzzer finds a crash, leak or UB; the reproducer is left in
# build-fuzz/artifacts/.
# Usage: scripts/run_fuzz.sh [seconds]   (safetensors; default 60; FUZZ_SECONDS also sets it)
#        OPENAI_FUZZ_SECONDS: the OpenAI mapping fuzzer's time (default 45)
#        HTTP_FUZZ_SECONDS: the HTTP request reader fuzzer's time (default 30)
#        extra libFuzzer flags via FUZZ_FLAGS, e.g. FUZZ_FLAGS="-runs=1000"
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-${FUZZ_SECONDS:-60}}
openai_seconds=${OPENAI_FUZZ_SECONDS:-45}
http_seconds=${HTTP_FUZZ_SECONDS:-30}
cmake -S tests/fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j2
mkdir -p build-fuzz/artifacts
# New inputs go to scratch corpora so the committed seeds stay as they are.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/safetensors" "$work/openai" "$work/http"
# shellcheck disable=SC2086  # FUZZ_FLAGS is a list of flags
./build-fuzz/safetensors_header_fuzz -max_total_time="$seconds" -max_len=4096 \
  -dict=tests/fuzz/safetensors.dict -artifact_prefix=build-fuzz/artifacts/ -print_final_stats=1 \
  ${FUZZ_FLAGS:-} "$work/safetensors" tests/fuzz/corpus

# The audit's 200 KB / 2 MB deep-nesting bodies are generated, not committed, and run once each
# at full size (fuzzing them would raise -max_len for every input).
python3 tests/fuzz/make_openai_deep_seeds.py "$work/openai_deep"
./build-fuzz/openai_request_fuzz -artifact_prefix=build-fuzz/artifacts/ "$work"/openai_deep/*
# shellcheck disable=SC2086
./build-fuzz/openai_request_fuzz -max_total_time="$openai_seconds" -max_len=8192 \
  -dict=tests/fuzz/openai.dict -artifact_prefix=build-fuzz/artifacts/ -print_final_stats=1 \
  ${FUZZ_FLAGS:-} "$work/openai" tests/fuzz/openai_corpus

# shellcheck disable=SC2086
./build-fuzz/http_request_fuzz -max_total_time="$http_seconds" -max_len=4096 \
  -artifact_prefix=build-fuzz/artifacts/ -print_final_stats=1 \
  ${FUZZ_FLAGS:-} "$work/http" tests/fuzz/http_corpus

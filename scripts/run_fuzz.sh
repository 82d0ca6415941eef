#!/usr/bin/env bash
# Builds the safetensors header fuzzer with clang (in build-fuzz/) and runs it for a bounded time
# over the committed seed corpus. Exits non-zero if the fuzzer finds a crash, leak or UB; the
# reproducer is left in build-fuzz/artifacts/.
# Usage: scripts/run_fuzz.sh [seconds]   (default 60; FUZZ_SECONDS also sets it)
#        extra libFuzzer flags via FUZZ_FLAGS, e.g. FUZZ_FLAGS="-runs=1000"
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-${FUZZ_SECONDS:-60}}
cmake -S tests/fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j2
mkdir -p build-fuzz/artifacts
# New inputs go to a scratch corpus so the committed seeds stay as they are.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2086  # FUZZ_FLAGS is a list of flags
./build-fuzz/safetensors_header_fuzz -max_total_time="$seconds" -max_len=4096 \
  -dict=tests/fuzz/safetensors.dict -artifact_prefix=build-fuzz/artifacts/ -print_final_stats=1 \
  ${FUZZ_FLAGS:-} "$work" tests/fuzz/corpus

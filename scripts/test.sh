#!/usr/bin/env bash
# Builds and runs every test suite; this is the command README.md shows and CI runs.
#   1. release build: all ctest suites (unit, golden/integration, CLI smoke);
#   2. ASan+UBSan build: the unit-labelled suites;
#   3. the safetensors header fuzzer for a bounded time (FUZZ_SECONDS, default 60).
# DEEPINFER_SKIP_ASAN=1 / DEEPINFER_SKIP_FUZZ=1 skip steps 2 / 3 for quick local runs.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh release
ctest --preset release
if [ "${DEEPINFER_SKIP_ASAN:-0}" != 1 ]; then
  ./build.sh asan
  ASAN_OPTIONS=detect_leaks=1 ctest --preset asan -L unit
fi
if [ "${DEEPINFER_SKIP_FUZZ:-0}" != 1 ]; then
  FUZZ_SECONDS=${FUZZ_SECONDS:-60} scripts/run_fuzz.sh
fi

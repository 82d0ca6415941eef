#!/usr/bin/env bash
# Builds (release and ASan+UBSan) and runs every test suite. This is the command README.md and CI use.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh release
ctest --preset release
if [ "${DEEPINFER_SKIP_ASAN:-0}" != 1 ]; then
  ./build.sh asan
  ctest --preset asan -L unit
fi

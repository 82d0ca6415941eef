#!/usr/bin/env bash
# Sets up and builds deepinfer. Usage: ./build.sh [release|debug|asan]  (default release)
# DEEPINFER_UNIT_TESTS_IN_ALL=OFF leaves the unit test programs out (scripts/test.sh builds the
# few its release step runs by name); each call sets it, so it never sticks in the cache.
# DEEPINFER_UNITY_BUILD=OFF compiles one object a file (default ON here: unity batches take about
# a third off a whole build; decision 0021).
set -euo pipefail
cd "$(dirname "$0")"
preset=${1:-release}
bash scripts/install_deps.sh
cmake --preset "$preset" -DDEEPINFER_UNIT_TESTS_IN_ALL="${DEEPINFER_UNIT_TESTS_IN_ALL:-ON}" \
  -DDEEPINFER_UNITY_BUILD="${DEEPINFER_UNITY_BUILD:-ON}" >/dev/null
cmake --build --preset "$preset"

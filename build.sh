#!/usr/bin/env bash
# Sets up and builds deepinfer. Usage: ./build.sh [release|debug|asan]  (default release)
set -euo pipefail
cd "$(dirname "$0")"
preset=${1:-release}
bash scripts/install_deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"

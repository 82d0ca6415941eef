#!/usr/bin/env bash
# Prints the SASS of one kernel of a .cu file under src/, for reading instruction counts and
# dependency chains here, without a GPU. Needs scripts/install_deps.sh --sass-tools.
# Usage: scripts/sass_of.sh FILE.cu MANGLED_NAME_PART [BUILD_DIR]
#   e.g. scripts/sass_of.sh src/deepinfer/backend/cuda/mhc/mhc.cu hc_pre_kernelILb1E
# How: CUDA 13's nvcc writes the PTX (sm_90, not sm_90a), whose ISA version is lowered to 7.8
# with the lines 11.8's ptxas does not know removed (cp.async.bulk.prefetch, griddepcontrol).
# So the listing is 11.8's ptxas's code from 13.0's PTX: the same kernel structure (loops,
# loads, divisions, branches), not byte for byte what runs.
set -euo pipefail
file=${1:?usage: sass_of.sh FILE.cu MANGLED_NAME_PART [BUILD_DIR]}
name=${2:?usage: sass_of.sh FILE.cu MANGLED_NAME_PART [BUILD_DIR]}
tools=/opt/cuda-11.8-tools/usr/bin
[ -x $tools/nvdisasm ] || { echo "sass_of.sh: run scripts/install_deps.sh --sass-tools" >&2; exit 1; }
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nvcc -Isrc -O2 -DNDEBUG -gencode=arch=compute_90,code=sm_90 --expt-relaxed-constexpr -std=c++17 \
  -x cu -ptx "$file" -o "$tmp/k.ptx" 2>/dev/null
sed -e 's/^\.version .*/.version 7.8/' -e 's/^\s*cp\.async\.bulk\.prefetch.*$//' \
  -e 's/griddepcontrol\.[a-z_]*;//' "$tmp/k.ptx" > "$tmp/k78.ptx"
$tools/ptxas -arch=sm_90 -O3 "$tmp/k78.ptx" -o "$tmp/k.cubin"
$tools/nvdisasm -c "$tmp/k.cubin" |
  awk -v n="$name" '/^\.text\./ { on = index($0, n) > 0 } on' |
  sed -E 's/^\s+\/\*[0-9a-f]+\*\/\s+//; s/\s*\/\*[^*]*\*\/\s*$//'

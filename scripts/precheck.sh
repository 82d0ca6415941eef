#!/usr/bin/env bash
# Before the first build: is this machine ready to build deepinfer? One line per check, marked
# pass, warn or fail; exits 1 when something the build needs is missing (scripts/install_deps.sh
# installs the packages). Once built, `deepinfer precheck` checks more (a model's memory, Redis,
# NCCL/UCX) and has --json.
set -uo pipefail
failed=0
line() { printf '%s  %s: %s\n' "$1" "$2" "$3"; [ "$1" = fail ] && failed=1; return 0; }
# version_at_least "3.25.1" 3 25
version_at_least() {
  local major minor
  major=${1%%.*}; minor=${1#*.}; minor=${minor%%.*}
  [ "$major" -gt "$2" ] || { [ "$major" -eq "$2" ] && [ "${minor:-0}" -ge "$3" ]; }
}

if v=$(c++ -dumpfullversion -dumpversion 2>/dev/null); then
  if version_at_least "$v" 12 0 || c++ --version 2>/dev/null | grep -q clang; then
    line pass "c++ compiler" "$(c++ --version | head -1)"
  else
    line fail "c++ compiler" "$(c++ --version | head -1) (C++20 as used here needs GCC 12 or Clang 14)"
  fi
else
  line fail "c++ compiler" "not found (build-essential)"
fi
if v=$(cmake --version 2>/dev/null | sed -n 's/^cmake version \([0-9.]*\).*/\1/p'); [ -n "$v" ]; then
  if version_at_least "$v" 3 25; then line pass cmake "$v"; else line fail cmake "$v (3.25 or newer)"; fi
else
  line fail cmake "not found"
fi
missing=()
for p in build-essential cmake ninja-build pkg-config libgtest-dev nlohmann-json3-dev libpcre2-dev \
         libcli11-dev pybind11-dev libboost-dev libicu-dev libssl-dev libhiredis-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ! command -v dpkg-query >/dev/null; then
  line warn "debian packages" "dpkg-query not found: not a Debian system?"
elif [ ${#missing[@]} -eq 0 ]; then
  line pass "debian packages" "every package the build needs is installed"
else
  line fail "debian packages" "missing: ${missing[*]} (run scripts/install_deps.sh)"
fi
if v=$(/usr/local/cuda/bin/nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p'); [ -n "$v" ]; then
  line pass "cuda toolkit" "nvcc release $v (the CUDA backend will be built)"
else
  line warn "cuda toolkit" "no /usr/local/cuda/bin/nvcc: a CPU-only build"
fi
if out=$(nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version \
           --format=csv,noheader,nounits 2>/dev/null) && [ -n "$out" ]; then
  while IFS=, read -r idx name cap mem driver; do
    case "${cap// /}" in
      9.*|10.*) line pass "gpu${idx}" "${name# }, compute capability ${cap# }, ${mem# } MiB, driver ${driver# }" ;;
      *) line warn "gpu${idx}" "${name# }, compute capability ${cap# } (not supported: SM90 and SM100 are)" ;;
    esac
  done <<< "$out"
else
  line warn gpu "no NVIDIA GPU found: only --device cpu will run"
fi
exit $failed

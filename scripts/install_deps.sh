#!/usr/bin/env bash
# Installs every Debian package the build and the tests need (Debian 12).
set -euo pipefail
# lld: the CPU trees link with it when present (CMakeLists.txt), 2-3x faster than GNU ld.
pkgs=(build-essential cmake ninja-build pkg-config git clang clang-format clang-tidy lld
      libclang-rt-14-dev libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
      libpcre2-dev libcli11-dev pybind11-dev python3 python3-dev python3-jsonschema python3-pytest
      python3-matplotlib
      libboost-dev libicu-dev curl libssl-dev libhiredis-dev redis-server
      libucx-dev)
# Node.js for the e2e tests: Debian's packages only where no node/npm is installed (a
# NodeSource nodejs bundles npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  pkgs+=(nodejs npm)
fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
# --sass-tools (optional, for kernel work only): CUDA 11.8's ptxas and nvdisasm from Debian's
# non-free nvidia-cuda-toolkit, unpacked under /opt/cuda-11.8-tools (nothing else installed, the
# apt source removed again). scripts/sass_of.sh uses them: CUDA 13's cubins are not readable by
# 11.8's nvdisasm, and 13.0 on this machine ships neither cuobjdump nor nvdisasm.
if [ "${1:-}" = --sass-tools ] && [ ! -x /opt/cuda-11.8-tools/usr/bin/nvdisasm ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  src=/etc/apt/sources.list.d/deepinfer-nonfree-tmp.sources
  printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
    $SUDO tee "$src" >/dev/null
  $SUDO apt-get update -qq
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -qq nvidia-cuda-toolkit)
  $SUDO rm -f "$src"
  $SUDO apt-get update -qq
  $SUDO mkdir -p /opt/cuda-11.8-tools
  $SUDO dpkg -x "$tmp"/nvidia-cuda-toolkit_*.deb /opt/cuda-11.8-tools
  rm -rf "$tmp"
fi

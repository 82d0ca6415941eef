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

#!/usr/bin/env bash
# Sourced on the GPU machine by a device call's script: unpacks what scripts/pack_gpu_carry.sh
# and scripts/build_gpu_variants.sh put into .carry/, each where present, and sets what the
# binaries need:
#   .carry/bin.tar.xz -> $B (.carry/bin); .carry/variants.tar.xz into $B (one xz tar whose
#   members share most of their bytes: xz's window keeps one copy; older carries hold
#   .carry/NAME.xz); .carry/golden_v41.tar.xz -> .carry/shared;
#   .carry/redis.tar.xz -> /tmp/redis, on PATH;
#   DEEPINFER_SOURCE_DIR and DEEPINFER_SHARED_DIR; the shared libraries of $B/BINARY for each
#   BINARY given (scripts/gpu_libs.sh).
# Usage: source scripts/gpu_carry_env.sh BINARY...
B=.carry/bin
[ -f .carry/bin.tar.xz ] && mkdir -p $B && tar -xJf .carry/bin.tar.xz -C .carry
[ -f .carry/variants.tar.xz ] && mkdir -p $B && tar -xJf .carry/variants.tar.xz -C $B
[ -f .carry/golden_v41.tar.xz ] && mkdir -p .carry/shared &&
  tar -xJf .carry/golden_v41.tar.xz -C .carry/shared
if [ -f .carry/redis.tar.xz ]; then  # redis-server with its own libraries, for the cluster tier
  mkdir -p /tmp/redis && tar -xJf .carry/redis.tar.xz -C /tmp/redis && export PATH=/tmp/redis:$PATH
fi
export DEEPINFER_SOURCE_DIR=$PWD DEEPINFER_SHARED_DIR=$PWD/.carry/shared
source scripts/gpu_libs.sh $(printf "$B/%s " "$@")

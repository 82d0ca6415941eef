#!/usr/bin/env bash
# Here, before a device call: builds deepinfer and cuda_ops_test once per variant, each with one
# or more compile-time constants of the CUDA kernels changed, and packs them as deepinfer_<name>
# and ops_<name>, all in one .carry/variants.tar.xz (replacing the last one). gpu_next_check.sh's
# phases a, e, f and w bench every deepinfer_<name> beside the carried binary and run every
# ops_<name> under OPS_FILTER, on the same machine.
# Usage: scripts/build_gpu_variants.sh BUILD_DIR NAME:MACRO=VALUE[,MACRO=VALUE...] [...]
#   VARIANTS_OUT=PATH writes the archive there instead (e.g. while a device call carries .carry).
#   VARIANT_TESTS="cuda_model_test ..." also builds and packs those test binaries, as
#   <test>_<name> (the goldens of a variant that changes bits).
#   e.g. scripts/build_gpu_variants.sh build mt3:W4_WIDE_MT=3 mb1:W4_WIDE_GATE_UP_MIN_BLOCKS=1
# MACRO must have one `#define MACRO value` default line under src/ (the #ifndef form). The
# source is restored after each build and once more at the end, so build BUILD_DIR's own
# binaries (and scripts/pack_gpu_carry.sh) after this.
set -euo pipefail
build=${1:?usage: build_gpu_variants.sh BUILD_DIR NAME:MACRO=VALUE ...}
shift
cd "$(dirname "$0")/.."
mkdir -p .carry
stage=$(mktemp -d)
# Puts back the sources a variant changed, newest first, so a file changed twice ends as it began.
restore() {
  for ((i = ${#changed[@]} - 1; i >= 0; i--)); do cp "/tmp/variant_backup_$i" "${changed[$i]}"; done
}
for spec in "$@"; do
  name=${spec%%:*} defs=${spec#*:}
  [ -n "$name" ] && [ "$defs" != "$spec" ] ||
    { echo "build_gpu_variants.sh: '$spec' is not NAME:MACRO=VALUE[,MACRO=VALUE...]" >&2; exit 1; }
  changed=()
  IFS=, read -ra pairs <<< "$defs"
  for def in "${pairs[@]}"; do
    macro=${def%%=*} value=${def#*=}
    [ -n "$macro" ] && [ "$def" != "$macro" ] ||
      { echo "build_gpu_variants.sh: '$def' in '$spec' is not MACRO=VALUE" >&2; exit 1; }
    files=$(grep -rlE "^#define $macro( |$)" src || true)
    [ "$(echo "$files" | grep -c .)" = 1 ] ||
      { echo "build_gpu_variants.sh: no single '#define $macro' under src/ ($files)" >&2; exit 1; }
    n=${#changed[@]}
    cp "$files" "/tmp/variant_backup_$n"
    changed+=("$files")
    trap restore EXIT
    sed -i -E "s|^#define $macro( .*)?\$|#define $macro $value|" "$files"
    echo "== $name: $(grep -E "^#define $macro " "$files") in $files"
  done
  # shellcheck disable=SC2086  # a list of targets
  flock /tmp/build.lock ninja -C "$build" deepinfer cuda_ops_test ${VARIANT_TESTS:-} \
    > "/tmp/variant_$name.log" 2>&1 ||
    { tail -20 "/tmp/variant_$name.log" >&2; exit 1; }
  restore
  trap - EXIT
  ops=$(find "$build" -name cuda_ops_test -type f -perm -u+x | head -1)
  strip -o "$stage/deepinfer_$name" "$build/deepinfer"
  strip -o "$stage/ops_$name" "$ops"
  for t in ${VARIANT_TESTS:-}; do
    f=$(find "$build" -name "$t" -type f -perm -u+x | head -1)
    strip -o "$stage/${t}_$name" "$f"
  done
done
# One archive at xz -9 (a 64 MB window): the variants differ from each other in a few kernels, so
# each after the first adds well under a megabyte instead of 3.6.
out=${VARIANTS_OUT:-.carry/variants.tar.xz}
tar -cf - -C "$stage" . | xz -9 -T1 > "$out"
rm -rf "$stage"
ls -la "$out"

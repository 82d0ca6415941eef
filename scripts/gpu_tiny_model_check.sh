#!/usr/bin/env bash
# On the GPU machine (issue 22): the streamed V4-Flash presets. Prints the dry-run plans, tries
# v4-flash-full (refused up front where the disk lacks ~160 GB; written where it fits), times
# v4-flash-8layer, then checks that a model made with the same seed on a 3-layer cut of the same
# config is a bitwise subset of it. Logs to $OUT (or ./gpu_logs). BIN_DIR holds deepinfer
# (default build); WORK_DIR holds the models (default /tmp).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu_logs}
mkdir -p "$out"
bin=${BIN_DIR:-build}/deepinfer
work=${WORK_DIR:-/tmp}
source scripts/gpu_libs.sh "$bin"
echo "cores $(nproc)"; free -g | head -2; df -h "$work" /dev/shm 2>/dev/null
"$bin" make-tiny-model --preset v4-flash-full --dry-run
"$bin" make-tiny-model --preset v4-flash-8layer --dry-run
/usr/bin/time -v timeout 560 "$bin" make-tiny-model "$work/full" --preset v4-flash-full --seed 7 \
  > "$out/full.log" 2>&1
echo "full rc $?"; grep -E "RESOURCE|^shard|Elapsed|Maximum resident" "$out/full.log" | tail -4
if [ ! -f "$work/full/config.json" ]; then rm -rf "$work/full"; fi
/usr/bin/time -v timeout 360 "$bin" make-tiny-model "$work/m8" --preset v4-flash-8layer --seed 7 \
  > "$out/m8.log" 2>&1
echo "m8 rc $?"; grep -E "^shard|Elapsed|Maximum resident|Percent of CPU" "$out/m8.log" | tail -6
python3 - "$work" <<'PY'
import json, sys
c = json.load(open(sys.argv[1] + "/m8/config.json"))
c["num_hidden_layers"] = 3
c["compress_ratios"] = c["compress_ratios"][:3] + [0]
json.dump(c, open(sys.argv[1] + "/c3.json", "w"), indent=2)
PY
/usr/bin/time -v timeout 200 "$bin" make-tiny-model "$work/m3" --config "$work/c3.json" \
  --quantized --streamed --seed 7 --shard-size-mib 4096 > "$out/m3.log" 2>&1
echo "m3 rc $?"; grep -E "Elapsed|Maximum resident" "$out/m3.log"
python3 tools/compare_checkpoint_tensors.py "$work/m3" "$work/m8"; echo "compare 3 in 8 rc $?"
if [ -f "$work/full/config.json" ]; then
  python3 tools/compare_checkpoint_tensors.py "$work/m8" "$work/full"; echo "compare 8 in full rc $?"
fi

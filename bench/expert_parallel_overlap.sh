#!/usr/bin/env bash
# Two-batch overlap against the serial exchange (docs/decisions/0015): an expert-parallel group
# of `deepinfer bench latency` processes over TCP on loopback (each rank its own batch, the same
# on every rank), run alternately with and without --no-two-batch-overlap, `reps` times each.
# Prints, per group size and mode, the median over runs of rank 0's prefill step (TTFT p50: the
# batch's prompts in one step), decode step (ITL p50) and mean step. Not a test.
# Usage: bench/expert_parallel_overlap.sh [path/to/deepinfer] [reps] [sizes] [bench flags...]
#   e.g. bench/expert_parallel_overlap.sh build/deepinfer 5 "2 4" --batch-size 4 --input-len 256
set -eu
bin="$(realpath "${1:-build/deepinfer}")"
reps="${2:-5}"
sizes="${3:-2}"
shift $(($# > 3 ? 3 : $#))
flags=("$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run_group() {  # size mode rep
  local size=$1 mode=$2 rep=$3 port pids=()
  port=$(free_port)
  local extra=()
  [ "$mode" = serial ] && extra=(--no-two-batch-overlap)
  for ((r = 0; r < size; r++)); do
    mkdir -p "$tmp/$size-$mode-$rep-$r"
    (cd "$tmp/$size-$mode-$rep-$r" && "$bin" bench latency --expert-parallel-size "$size" \
      --expert-parallel-rank "$r" --expert-parallel-address "127.0.0.1:$port" "${extra[@]}" \
      "${flags[@]}" --output-json out.json >log.txt 2>&1) &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { cat "$tmp"/$size-$mode-$rep-*/log.txt; exit 1; }; done
}

for size in $sizes; do
  for ((rep = 0; rep < reps; rep++)); do
    for mode in overlap serial; do run_group "$size" "$mode" "$rep"; done
  done
done
python3 - "$tmp" "$reps" "$sizes" "${flags[*]}" <<'PY'
import json, statistics, sys
tmp, reps, sizes, flags = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4]
print(f"bench latency {flags} ; rank 0, median of {reps} runs")
print("| ranks | exchange | prefill step ms | decode step ms | mean step ms |")
print("|---:|---|---:|---:|---:|")
for size in sizes:
    for mode in ("overlap", "serial"):
        runs = [json.load(open(f"{tmp}/{size}-{mode}-{rep}-0/out.json")) for rep in range(reps)]
        med = lambda f: statistics.median(f(r) for r in runs)
        print("| %s | %s | %.2f | %.2f | %.2f |" % (
            size, "two-batch overlap" if mode == "overlap" else "serial",
            med(lambda r: r["ttft_ms_p50"]), med(lambda r: r["itl_ms_p50"]),
            med(lambda r: 1e3 * r["step_s"]["total"] / r["steps"])))
PY

#!/usr/bin/env bash
# Sweeps a deepinfer server over concurrency levels with `deepinfer bench serve` and plots the
# curves DeepSeek's README shows (examples/sweep/README.md):
#   throughput_per_gpu_vs_tpot.png  output tok/s per GPU against median TPOT (one point a level);
#   ttft_vs_load.png                TTFT p50 and p99 against concurrency.
# It starts the server itself (the embedded tiny model on the CPU unless --model/--device say
# otherwise), waits for /health, runs one bench per level, stops the server, and writes
# OUT/level_<c>.json, OUT/sweep.json and the PNGs (Debian's python3-matplotlib).
#
# Usage: run_sweep.sh [--bin PATH] [--model DIR] [--device cpu|cuda] [--gpus N]
#                     [--concurrency "1 2 4 ... 256"] [--prompts-per-level K] [--input-len N]
#                     [--output-len N] [--out DIR] [--port N] [-- extra serve flags...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin="$here/../../build/deepinfer"
model="" device=cpu gpus=1 port="" out=sweep_out
levels="1 2 4 8 16 32 64 128 256"
per_level=4 input_len=512 output_len=64
serve_extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --device) device="$2"; shift 2 ;;
    --gpus) gpus="$2"; shift 2 ;;
    --concurrency) levels="$2"; shift 2 ;;
    --prompts-per-level) per_level="$2"; shift 2 ;;
    --input-len) input_len="$2"; shift 2 ;;
    --output-len) output_len="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --) shift; serve_extra=("$@"); break ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_sweep.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$bin" ] || { echo "run_sweep.sh: --bin '$bin' is not an executable (build first)" >&2; exit 2; }
# The plots need matplotlib: Debian's python3-matplotlib is under /usr/bin/python3 (a python3
# earlier on PATH may lack it); PYTHON overrides.
py=${PYTHON:-}
if [ -z "$py" ]; then
  for c in /usr/bin/python3 python3; do
    if "$c" -c 'import matplotlib' 2>/dev/null; then py=$c; break; fi
  done
fi
[ -n "$py" ] || { echo "run_sweep.sh: no python3 with matplotlib (apt install python3-matplotlib, or set PYTHON)" >&2; exit 2; }
mkdir -p "$out"
[ -n "$port" ] || port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
max_level=0
for c in $levels; do [ "$c" -gt "$max_level" ] && max_level=$c; done
serve_args=(serve --host 127.0.0.1 --port "$port" --device "$device" --max-num-seqs "$max_level")
[ -n "$model" ] && serve_args+=("$model")
"$bin" "${serve_args[@]}" "${serve_extra[@]}" >"$out/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
echo "run_sweep.sh: server pid $pid on $base (log $out/server.log)"
for _ in $(seq 1 1200); do
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$base/health" || true)
  [ "$code" = 200 ] && break
  kill -0 "$pid" 2>/dev/null || { echo "run_sweep.sh: the server exited:" >&2; tail -20 "$out/server.log" >&2; exit 1; }
  sleep 0.5
done
[ "$code" = 200 ] || { echo "run_sweep.sh: /health never became 200" >&2; exit 1; }
for c in $levels; do
  n=$((c * per_level))
  echo "run_sweep.sh: concurrency $c, $n prompts"
  "$bin" bench serve --base-url "$base" --num-prompts "$n" --max-concurrency "$c" \
    --random-input-len "$input_len" --random-output-len "$output_len" --num-warmups 1 \
    --disable-tqdm --output-json "$out/level_$c.json" >"$out/level_$c.txt"
  grep -E "Output token throughput|Median|P50 TPOT|P50 TTFT" "$out/level_$c.txt" || true
done
"$py" "$here/plot_sweep.py" --gpus "$gpus" --device "$device" --out "$out" $(for c in $levels; do echo "$out/level_$c.json"; done)

#!/usr/bin/env bash
# The router's added latency: `deepinfer bench serve` straight at one `deepinfer serve` worker,
# then through `deepinfer router` in front of that same worker (so the model's work is the same),
# at each concurrency; prints p50/p99 TTFT and E2E of both and the difference. Not a test.
# Usage: bench/router_latency.sh [path/to/deepinfer] [num_prompts] [concurrency levels...]
set -eu
bin="${1:-build/deepinfer}"
n="${2:-200}"
shift $(( $# > 2 ? 2 : $# ))
levels=("${@:-1 8}")
levels=(${levels[*]})
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_health() { for _ in $(seq 1 240); do curl -sf -o /dev/null "$1/health" && return; sleep 0.25; done; exit 1; }
wp=$(free_port); rp=$(free_port)
"$bin" serve --host 127.0.0.1 --port "$wp" >"$tmp/worker.log" 2>&1 & pids+=($!)
wait_health "http://127.0.0.1:$wp"
"$bin" router --port "$rp" --worker "http://127.0.0.1:$wp" >"$tmp/router.log" 2>&1 & pids+=($!)
wait_health "http://127.0.0.1:$rp"
for c in "${levels[@]}"; do
  for target in direct router; do
    port=$([ "$target" = direct ] && echo "$wp" || echo "$rp")
    "$bin" bench serve --base-url "http://127.0.0.1:$port" --num-prompts "$n" --max-concurrency "$c" \
      --random-input-len 64 --random-output-len 8 --num-warmups 4 --disable-tqdm \
      --output-json "$tmp/$target-$c.json" \
      >/dev/null 2>"$tmp/bench.err" || { cat "$tmp/bench.err"; exit 1; }
  done
  python3 - "$tmp/direct-$c.json" "$tmp/router-$c.json" "$c" <<'PY'
import json, sys
d, r = (json.load(open(p)) for p in sys.argv[1:3])
assert d["failed"] == 0 and r["failed"] == 0, (d["failed"], r["failed"])
row = lambda k, p: (d[k][p], r[k][p], r[k][p] - d[k][p])
print(f"concurrency {sys.argv[3]}, {d['completed']} requests each:")
for k in ("ttft_ms", "e2el_ms"):
    for p in ("p50", "p99"):
        print("  %-8s %s  direct %8.3f ms  router %8.3f ms  added %+7.3f ms" % ((k, p) + row(k, p)))
PY
done

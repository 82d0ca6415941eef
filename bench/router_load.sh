#!/usr/bin/env bash
# Load through `deepinfer router`: N streamed requests, C at once, to four CPU workers of the
# embedded tiny model on loopback: `pd` = 2 `serve --role prefill` + 2 `serve --role decode`
# behind `router --prefill A B --decode C D`; `dp` = 4 plain workers behind `router --worker`.
# Checks that every request completed (bench serve counts a cut stream, an error event or an
# HTTP error as failed, and the script prints the first), and reports bench serve's TTFT/E2E
# with the router's own added-latency quantiles (deepinfer_router:added_latency_seconds: time
# to the client's first byte less the time spent waiting on workers) and per-worker requests.
# ROUTER_NICE=-10 runs the router at that nice value (a diagnostic: how much of the added latency
# is the router waiting for a CPU on a machine its workers saturate). Not a test. Usage:
#   bench/router_load.sh [path/to/deepinfer] [pd|dp] [num_prompts] [concurrency] [in_len] [out_len]
set -eu
bin="${1:-build/deepinfer}"
mode="${2:-pd}"
n="${3:-1000}"
c="${4:-1000}"
in_len="${5:-64}"
out_len="${6:-16}"
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_health() { for _ in $(seq 1 240); do curl -sf -o /dev/null "$1/health" && return; sleep 0.25; done; echo "no $1"; exit 1; }
urls=()
for i in 0 1 2 3; do
  p=$(free_port)
  role=()
  if [ "$mode" = pd ]; then role=(--role "$([ $i -lt 2 ] && echo prefill || echo decode)"); fi
  "$bin" serve --host 127.0.0.1 --port "$p" "${role[@]}" >"$tmp/worker$i.log" 2>&1 &
  pids+=($!)
  urls+=("http://127.0.0.1:$p")
done
for u in "${urls[@]}"; do wait_health "$u"; done
rp=$(free_port)
router="http://127.0.0.1:$rp"
if [ "$mode" = pd ]; then
  layout=(--prefill "${urls[0]}" "${urls[1]}" --decode "${urls[2]}" "${urls[3]}")
else
  layout=(--worker "${urls[@]}")
fi
nice -n "${ROUTER_NICE:-0}" "$bin" router --port "$rp" "${layout[@]}" --health-interval-s 1 \
  >"$tmp/router.log" 2>&1 &
pids+=($!)
wait_health "$router"
"$bin" bench serve --base-url "$router" --num-prompts "$n" --max-concurrency "$c" \
  --request-rate inf --random-input-len "$in_len" --random-output-len "$out_len" \
  --num-warmups 4 --request-timeout 600 --disable-tqdm --output-json "$tmp/load.json" \
  >"$tmp/bench.out" 2>&1 || { cat "$tmp/bench.out"; exit 1; }
curl -s "$router/metrics" >"$tmp/metrics.txt"
python3 - "$tmp/load.json" "$tmp/metrics.txt" "$mode" "$n" "$c" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
metrics = open(sys.argv[2]).read()
mode, n, c = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def series(name):
    return {m.group(1) or "": float(m.group(2)) for m in re.finditer(
        r"^deepinfer_router:" + re.escape(name) + r"(\{[^}]*\})? (\S+)$", metrics, re.M)}
print(f"mode {mode}: {n} streamed requests, concurrency {c}: completed {r['completed']}, failed {r['failed']}")
if r["failed"]:
    print("  first error:", r.get("first_error"))
print("  duration %.1f s, %.1f req/s, output %.0f tok/s" % (r["duration_s"], r["request_throughput"], r["output_throughput"]))
for k in ("ttft_ms", "e2el_ms"):
    print("  %-8s p50 %9.1f ms  p99 %9.1f ms" % (k, r[k]["p50"], r[k]["p99"]))
added = series("added_latency_seconds")
print("  router-added latency (router's own, %d requests): p50 %.3f ms  p90 %.3f ms  p99 %.3f ms" % (
    series("added_latency_seconds_count")[""], added['{quantile="0.5"}'] * 1e3,
    added['{quantile="0.9"}'] * 1e3, added['{quantile="0.99"}'] * 1e3))
for labels, v in sorted(series("worker_requests_total").items()):
    fails = series("worker_failures_total")[labels]
    fb = series("worker_first_byte_seconds_sum")[labels] / max(1, series("worker_first_byte_seconds_count")[labels])
    print(f"  {labels}: requests {v:.0f}, failures {fails:.0f}, mean queue time {fb * 1e3:.1f} ms")
for k in ("retries_total", "pd_pairs_total", "pd_transfer_failures_total"):
    print(f"  {k}: {series(k)['']:.0f}")
for labels, v in series("pd_plain_total").items():
    print(f"  pd_plain_total{labels}: {v:.0f}")
sys.exit(0 if r["completed"] == n else 1)
PY

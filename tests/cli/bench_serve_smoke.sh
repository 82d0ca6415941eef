#!/usr/bin/env bash
# deepinfer bench serve against a real deepinfer server (the embedded tiny model, CPU, loopback),
# then examples/sweep/run_sweep.sh over two concurrency levels, briefly:
#   1. random prompts, 4 in flight, one warm-up: every request completes with its max_tokens,
#      the latencies are positive and ordered (p50 <= p99), goodput is reported;
#   2. shared-prefix chat requests one at a time: repeats of a 300-token prefix come from the
#      server's prefix cache (cached prompt tokens > 0);
#   3. bad flags and an unreachable server fail with messages naming them;
#   4. the sweep writes one JSON per level, sweep.json and both PNGs.
# Usage: bench_serve_smoke.sh path/to/deepinfer
set -u
bin="$1"
tmp=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- server log"; tail -30 "$tmp/server.log" 2>/dev/null; exit 1; }
source "$(dirname "$0")/serve_helpers.sh"
start_server "$bin"

"$bin" bench serve --base-url "$base" --num-prompts 8 --max-concurrency 4 --random-input-len 40 \
  --random-output-len 6 --num-warmups 1 --goodput ttft:60000 --disable-tqdm \
  --output-json "$tmp/random.json" >"$tmp/random.txt" 2>&1 || fail "random run: $(cat "$tmp/random.txt")"
grep -q "Serving Benchmark Result" "$tmp/random.txt" || fail "no report: $(cat "$tmp/random.txt")"
python3 - "$tmp/random.json" <<'PY' || fail "random JSON: $(cat "$tmp/random.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["completed"] == 8 and r["failed"] == 0, r
assert r["total_output_tokens"] == 8 * 6, r          # ignore_eos: every request runs to max_tokens
assert r["total_input_tokens"] > 0, r
for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
    d = r[k]
    assert 0 < d["p50"] <= d["p99"], (k, d)
assert r["ttft_ms"]["p50"] <= r["e2el_ms"]["p50"], r
assert r["request_goodput"] > 0 and r["output_throughput"] > 0, r
assert r["num_warmups"] == 1 and r["dataset"]["name"] == "random", r
PY

"$bin" bench serve --base-url "$base" --endpoint /v1/chat/completions --dataset-name shared-prefix \
  --prefix-len 300 --num-prefixes 2 --num-prompts 6 --max-concurrency 1 --random-input-len 8 \
  --random-output-len 3 --disable-tqdm --output-json "$tmp/prefix.json" >"$tmp/prefix.txt" 2>&1 ||
  fail "shared-prefix run: $(cat "$tmp/prefix.txt")"
python3 - "$tmp/prefix.json" <<'PY' || fail "shared-prefix JSON: $(cat "$tmp/prefix.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["completed"] == 6 and r["failed"] == 0, r
# Requests 2..5 repeat one of two 300-token prefixes already served: whole 128-token blocks of
# it come from the cache.
assert r["cached_prompt_tokens"] >= 4 * 128, r
PY

out=$("$bin" bench serve --base-url "ftp://x" 2>&1) && fail "a bad URL was accepted"
echo "$out" | grep -q -- "--base-url 'ftp://x'" || fail "bad URL message: $out"
out=$("$bin" bench serve --base-url "$base" --request-rate -2 2>&1) && fail "rate -2 accepted"
echo "$out" | grep -q -- "--request-rate" || fail "bad rate message: $out"
out=$("$bin" bench serve --base-url "$base" --goodput speed:5 2>&1) && fail "bad SLO accepted"
echo "$out" | grep -q "speed" || fail "bad SLO message: $out"
dead=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
out=$("$bin" bench serve --base-url "http://127.0.0.1:$dead" --model m --num-prompts 1 \
  --disable-tqdm --output-json "$tmp/dead.json" 2>&1) && fail "an unreachable server gave exit 0"
echo "$out" | grep -q "cannot connect" || fail "unreachable server message: $out"
kill "$pid"; wait "$pid" 2>/dev/null; pid=""

sweep="$(dirname "$0")/../../examples/sweep/run_sweep.sh"
"$sweep" --bin "$bin" --concurrency "1 2" --prompts-per-level 2 --input-len 24 --output-len 4 \
  --out "$tmp/sweep" >"$tmp/sweep.txt" 2>&1 || fail "sweep: $(tail -20 "$tmp/sweep.txt")"
for f in level_1.json level_2.json sweep.json throughput_per_gpu_vs_tpot.png ttft_vs_load.png; do
  [ -s "$tmp/sweep/$f" ] || fail "sweep wrote no $f: $(tail -20 "$tmp/sweep.txt")"
done
head -c 8 "$tmp/sweep/ttft_vs_load.png" | od -An -c | grep -q "P   N   G" || fail "not a PNG"
python3 - "$tmp/sweep/sweep.json" <<'PY' || fail "sweep.json: $(cat "$tmp/sweep/sweep.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert [p["concurrency"] for p in r["points"]] == [1, 2], r
assert all(p["completed"] == 2 * p["concurrency"] and p["output_tok_s"] > 0 for p in r["points"]), r
PY
echo "PASS bench serve smoke"

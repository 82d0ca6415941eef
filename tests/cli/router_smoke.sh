#!/usr/bin/env bash
# deepinfer router over two real `deepinfer serve` workers (embedded tiny model, CPU, loopback):
#   1. --help, and bad flags that name the flag or URL;
#   2. a greedy request through the router equals the same request sent to a worker (choices
#      with per-token logprobs, usage), chat and completions; a stream passes through too;
#   3. a repeated prompt is a cache_aware hit in /metrics;
#   4. the worker serving a long stream is killed: the client gets an error event and [DONE];
#      later requests succeed on the other worker and /metrics reports the dead one ejected;
#   5. restarted, it is readmitted and served again;
#   6. SIGTERM: a stream in flight finishes, the router exits 0.
# Usage: router_smoke.sh path/to/deepinfer
set -u
bin="$1"
source "$(dirname "$0")/servers_helpers.sh"
metric() { router_value "$router" "$1{worker=\"$2\"}"; }  # NAME WORKER_URL
json='Content-Type: application/json'

"$bin" router --help | grep -q -- "--health-interval-s" || fail "--help"
out=$("$bin" router --worker ftp://w:1 2>&1) && fail "a bad worker URL was accepted"
echo "$out" | grep -q -- "--worker: worker URL 'ftp://w:1'" || fail "bad URL message: $out"
out=$("$bin" router --worker http://127.0.0.1:1 --policy fastest 2>&1) && fail "bad policy accepted"
echo "$out" | grep -q -- "--policy 'fastest'" || fail "bad policy message: $out"
out=$("$bin" router --worker http://127.0.0.1:1 --health-interval-s 0 2>&1) && fail "interval 0"
echo "$out" | grep -q -- "--health-interval-s" || fail "bad interval message: $out"

start W0
start W1
start_router router --worker "${url[W0]}" --worker "${url[W1]}" --health-interval-s 0.3 \
  --health-timeout-s 1 --shutdown-grace 20
router="${url[router]}"
for w in W0 W1 router; do wait_health "$w"; done

# 2. Greedy, with per-token logprobs: bitwise the same through the router as direct.
comp='{"prompt": "The router test", "max_tokens": 12, "temperature": 0, "logprobs": 2}'
chat='{"messages": [{"role": "user", "content": "Hi there"}], "max_tokens": 10, "temperature": 0, "logprobs": true, "top_logprobs": 2}'
curl -sf "$router/v1/completions" -H "$json" -d "$comp" >"$tmp/r_comp.json" || fail "completions via router"
curl -sf "${url[W0]}/v1/completions" -H "$json" -d "$comp" >"$tmp/d_comp.json" || fail "completions direct"
curl -sf "$router/v1/chat/completions" -H "$json" -d "$chat" >"$tmp/r_chat.json" || fail "chat via router"
curl -sf "${url[W1]}/v1/chat/completions" -H "$json" -d "$chat" >"$tmp/d_chat.json" || fail "chat direct"
stream='{"prompt": "Stream me", "max_tokens": 8, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}'
curl -sfN "$router/v1/completions" -H "$json" -d "$stream" >"$tmp/r_stream.txt" || fail "stream via router"
curl -sfN "${url[W0]}/v1/completions" -H "$json" -d "$stream" >"$tmp/d_stream.txt" || fail "stream direct"
python3 - "$tmp" <<'PY' || fail "router and direct answers differ"
import json, sys
t = sys.argv[1]
for name in ("comp", "chat"):
    r, d = (json.load(open(f"{t}/{k}_{name}.json")) for k in "rd")
    assert r["choices"] == d["choices"] and r["usage"] == d["usage"], (name, r, d)
    assert r["choices"][0]["logprobs"], r
def events(path):
    raw = open(path).read()
    assert raw.endswith("data: [DONE]\n\n"), raw[-200:]
    out = []
    for block in raw.split("\n\n")[:-2]:
        assert block.startswith("data: "), block
        e = json.loads(block[6:])
        e.pop("id"), e.pop("created")
        out.append(e)
    return out
r, d = events(f"{t}/r_stream.txt"), events(f"{t}/d_stream.txt")
assert r == d and len(r) >= 2 and r[-1]["usage"]["completion_tokens"] == 8, (r, d)
PY

# 3. The same prompt again: a cache_aware hit.
curl -sf "$router/v1/completions" -H "$json" -d "$comp" >/dev/null || fail "repeat"
hits=$(curl -s "$router/metrics" | awk '/^deepinfer_router:worker_cache_aware_hits_total/ {s += $2} END {print s + 0}')
[ "$hits" -ge 1 ] || fail "no cache_aware hit: $(curl -s "$router/metrics")"

# 4. Kill the worker of a long stream after its first event.
long='{"prompt": "A long one", "max_tokens": 60000, "ignore_eos": true, "stream": true}'
curl -sN --max-time 30 "$router/v1/completions" -H "$json" -d "$long" >"$tmp/mid.txt" &
cpid=$!
for _ in $(seq 1 100); do grep -q '^data: {' "$tmp/mid.txt" 2>/dev/null && break; sleep 0.05; done
victim=""
for w in W0 W1; do [ "$(metric worker_outstanding_requests "${url[$w]}")" = 1 ] && victim=$w; done
[ -n "$victim" ] || fail "no worker has the stream outstanding"
kill -9 "${pid[$victim]}"
wait "${pid[$victim]}" 2>/dev/null
wait "$cpid" || fail "the client of a killed stream saw curl rc $?"
python3 - "$tmp/mid.txt" <<'PY' || fail "mid-stream failure not a clean error event: $(tail -c 400 "$tmp/mid.txt")"
import json, sys
raw = open(sys.argv[1]).read()
blocks = raw.split("\n\n")
assert blocks[-1] == "" and blocks[-2] == "data: [DONE]", blocks[-3:]
err = json.loads(blocks[-3][6:])["error"]
assert err["code"] == "worker_failed" and "mid-stream" in err["message"], err
for b in blocks[:-3]:  # every event before it is whole
    assert "choices" in json.loads(b[6:]), b
assert len(blocks) > 4, "the stream should have started"
PY
other=W0
[ "$victim" = W0 ] && other=W1
for n in 1 2 3 4; do
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 "$router/v1/completions" -H "$json" \
    -d "{\"prompt\": \"after the kill $n\", \"max_tokens\": 3}")
  [ "$code" = 200 ] || fail "request $n after the kill: $code"
done
sleep 1
[ "$(metric worker_healthy "${url[$victim]}")" = 0 ] || fail "dead worker not ejected"
[ "$(metric worker_ejections_total "${url[$victim]}")" -ge 1 ] || fail "no ejection counted"
[ "$(metric worker_healthy "${url[$other]}")" = 1 ] || fail "live worker ejected"

# 5. Restart it on its port: readmitted, and new prompts reach it again.
restart "$victim"
wait_health "$victim"
for _ in $(seq 1 40); do [ "$(metric worker_healthy "${url[$victim]}")" = 1 ] && break; sleep 0.1; done
[ "$(metric worker_healthy "${url[$victim]}")" = 1 ] || fail "restarted worker not readmitted"
before=$(metric worker_requests_total "${url[$victim]}")
for n in 1 2 3 4; do
  curl -sf "$router/v1/completions" -H "$json" -d "{\"prompt\": \"fresh $n\", \"max_tokens\": 2}" \
    >/dev/null || fail "request $n after the restart"
done
[ "$(metric worker_requests_total "${url[$victim]}")" -gt "$before" ] || fail "readmitted worker unused"

# 6. SIGTERM while a stream runs: it finishes, then the router exits 0.
drain='{"prompt": "Drain", "max_tokens": 400, "ignore_eos": true, "stream": true}'
curl -sN --max-time 30 "$router/v1/completions" -H "$json" -d "$drain" >"$tmp/drain.txt" &
cpid=$!
for _ in $(seq 1 100); do grep -q '^data: {' "$tmp/drain.txt" 2>/dev/null && break; sleep 0.05; done
kill -TERM "${pid[router]}"
wait "$cpid" || fail "drained stream: curl rc $?"
tail -c 20 "$tmp/drain.txt" | grep -q 'data: \[DONE\]' || fail "drained stream cut: $(tail -c 300 "$tmp/drain.txt")"
grep -q '"error"' "$tmp/drain.txt" && fail "drained stream has an error"
wait "${pid[router]}" || fail "router exit status $? after SIGTERM"
echo "PASS router smoke"

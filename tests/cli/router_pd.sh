#!/usr/bin/env bash
# deepinfer router in PD mode over real workers (embedded tiny model, CPU, loopback):
# prefill workers P0 P1 (`serve --role prefill`), decode workers D0 D1 (`--role decode`), and a
# reference `serve` (role both) that nothing routes to.
#   1. 1 prefill + 1 decode (router A: --prefill P0 --decode D0): greedy and seeded requests,
#      completions and chat, streamed and not, a forced tool call and a JSON schema, give the
#      reference's choices (tokens via per-token logprobs; tool call ids aside) and usage; a long prompt sent twice reports the same cached tokens;
#      every request was a transfer pair; n = 2 (no handoff) goes plain and still answers; a
#      refused request (400 from phase 1) reaches the client as the reference words it;
#   2. the decode workers' GET /load reaches /metrics;
#   3. 2 + 2 (router B, round_robin prefill): P0 killed, the request whose phase 1 went to it is
#      retried on P1 and answered;
#   3b. a prefill worker whose state cannot be fetched (it advertises an address nothing
#      listens on): the decode worker's kv_transfer_failed makes the router retry the pair on
#      the other prefill worker, with the reference's tokens;
#   4. the decode worker of a long stream killed mid-stream: an error event and [DONE]; the
#      next request is answered by the other decode worker;
#   5. `serve --register-with` joins a `--pd --allow-register` router, serves, and leaves on
#      SIGTERM.
# Usage: router_pd.sh path/to/deepinfer
set -u
bin="$1"
source "$(dirname "$0")/servers_helpers.sh"
value() { router_value "$@"; }  # ROUTER SERIES
start P0 --role prefill
start P1 --role prefill
start D0 --role decode
start D1 --role decode
start REF --role both
for w in P0 P1 D0 D1 REF; do wait_health "$w"; done
start_router A --health-timeout-s 3 --prefill "${url[P0]}" --decode "${url[D0]}" \
  --health-interval-s 0.3
a="${url[A]}"
json='Content-Type: application/json'

# 1. Identity with the reference server.
long=$(python3 -c 'print(" ".join(f"word{i}" for i in range(200)))')
i=0
while IFS= read -r line; do
  i=$((i + 1))
  path=${line%% *}
  body=${line#* }
  curl -sfN "$a$path" -H "$json" -d "$body" >"$tmp/r$i.txt" || fail "request $i via the router: $body"
  curl -sfN "${url[REF]}$path" -H "$json" -d "$body" >"$tmp/d$i.txt" || fail "request $i direct"
done <<EOF2
/v1/completions {"prompt": "Disaggregated greedy", "max_tokens": 12, "temperature": 0, "logprobs": 2}
/v1/completions {"prompt": "Disaggregated seeded", "max_tokens": 12, "temperature": 0.9, "seed": 42, "logprobs": 1}
/v1/chat/completions {"messages": [{"role": "user", "content": "Hi there"}], "max_tokens": 10, "temperature": 0, "logprobs": true, "top_logprobs": 2}
/v1/chat/completions {"messages": [{"role": "user", "content": "Seeded chat"}], "max_tokens": 10, "temperature": 0.8, "seed": 7, "logprobs": true}
/v1/completions {"prompt": "Streamed greedy", "max_tokens": 10, "temperature": 0, "logprobs": 1, "stream": true, "stream_options": {"include_usage": true}}
/v1/chat/completions {"messages": [{"role": "user", "content": "Streamed seeded"}], "max_tokens": 10, "temperature": 0.7, "seed": 3, "logprobs": true, "stream": true, "stream_options": {"include_usage": true}}
/v1/chat/completions {"messages": [{"role": "user", "content": "Call f"}], "max_tokens": 40, "temperature": 0, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}}], "tool_choice": {"type": "function", "function": {"name": "f"}}}
/v1/chat/completions {"messages": [{"role": "user", "content": "Call f streamed"}], "max_tokens": 40, "temperature": 0, "stream": true, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}}], "tool_choice": {"type": "function", "function": {"name": "f"}}}
/v1/chat/completions {"messages": [{"role": "user", "content": "JSON please"}], "max_tokens": 40, "temperature": 0, "logprobs": true, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}}
/v1/completions {"prompt": "$long", "max_tokens": 6, "temperature": 0, "logprobs": 1}
/v1/completions {"prompt": "$long and again", "max_tokens": 6, "temperature": 0, "logprobs": 1}
EOF2
python3 - "$tmp" "$i" <<'PY' || fail "router (PD) and reference answers differ"
import json, sys
t, n = sys.argv[1], int(sys.argv[2])
def no_call_ids(x):  # tool call ids are drawn per response
    if isinstance(x, dict):
        return {k: no_call_ids(v) for k, v in x.items() if not (k == "id" and "call" in str(v))}
    if isinstance(x, list):
        return [no_call_ids(v) for v in x]
    return x
def events(raw):
    assert raw.endswith("data: [DONE]\n\n"), raw[-200:]
    out = []
    for block in raw.split("\n\n")[:-2]:
        e = json.loads(block[6:])
        e.pop("id"), e.pop("created")
        out.append(no_call_ids(e))
    return out
for k in range(1, n + 1):
    r, d = (open(f"{t}/{s}{k}.txt").read() for s in "rd")
    if r.startswith("data: "):
        assert events(r) == events(d), (k, r[:600], d[:600])
        continue
    r, d = no_call_ids(json.loads(r)), no_call_ids(json.loads(d))
    assert r["choices"] == d["choices"], (k, r["choices"], d["choices"])
    assert r["usage"] == d["usage"], (k, r["usage"], d["usage"])
    assert r["choices"][0]["logprobs"] or r["choices"][0]["message"].get("tool_calls"), k
tool = json.loads(open(f"{t}/r7.txt").read())["choices"][0]["message"]["tool_calls"][0]
assert tool["function"]["name"] == "f", tool
# The tiny model may not close the object within max_tokens; the grammar still opened it.
assert json.loads(open(f"{t}/r9.txt").read())["choices"][0]["message"]["content"].startswith("{")
last = json.loads(open(f"{t}/r{n}.txt").read())["usage"]
assert last["prompt_tokens_details"]["cached_tokens"] > 0, last  # the long prompt's blocks
PY
[ "$(value "$a" pd_pairs_total)" = "$i" ] || fail "pd_pairs_total $(value "$a" pd_pairs_total), want $i"
[ "$(value "$a" pd_transfer_failures_total)" = 0 ] || fail "transfer failures"
n2='{"prompt": "Two at once", "max_tokens": 4, "temperature": 0.5, "seed": 1, "n": 2}'
curl -sf "$a/v1/completions" -H "$json" -d "$n2" >"$tmp/n2.json" || fail "n = 2 via the router"
python3 -c 'import json,sys; assert len(json.load(open(sys.argv[1]))["choices"]) == 2' "$tmp/n2.json" ||
  fail "n = 2 answer: $(cat "$tmp/n2.json")"
[ "$(value "$a" 'pd_plain_total{reason="no_handoff"}')" = 1 ] || fail "n = 2 not counted no_handoff"

# A request the worker refuses: phase 1's 400 is the client's answer, as the reference words it.
bad='{"prompt": "Refused", "max_tokens": -1}'
code=$(curl -s -o "$tmp/bad_r.json" -w '%{http_code}' "$a/v1/completions" -H "$json" -d "$bad")
curl -s -o "$tmp/bad_d.json" "${url[REF]}/v1/completions" -H "$json" -d "$bad"
[ "$code" = 400 ] || fail "a refused request via PD: $code $(cat "$tmp/bad_r.json")"
cmp -s "$tmp/bad_r.json" "$tmp/bad_d.json" || fail "400 bodies differ: $(cat "$tmp/bad_r.json")"

# 2. /load polled.
for _ in $(seq 1 50); do
  [ -n "$(value "$a" "worker_kv_usage{pool=\"decode\",worker=\"${url[D0]}\"}")" ] && break
  sleep 0.1
done
[ -n "$(value "$a" "worker_kv_usage{pool=\"decode\",worker=\"${url[D0]}\"}")" ] || fail "no /load in /metrics"

# 3. 2 + 2; P0 dies; round robin's cursor is on P0 for the next request (health checks every
# 60 s: the first ran at start, so the request meets the dead worker itself).
# Only the requests themselves find the dead workers (--health-interval-s 60).
start_router B --health-timeout-s 3 --prefill "${url[P0]}" "${url[P1]}" \
  --decode "${url[D0]}" "${url[D1]}" --prefill-policy round_robin --decode-policy round_robin \
  --worker-timeout-s 20 --health-interval-s 60
b="${url[B]}"
kill -9 "${pid[P0]}"
wait "${pid[P0]}" 2>/dev/null
ask='{"prompt": "After the prefill worker died", "max_tokens": 5, "temperature": 0}'
curl -sf --max-time 30 "$b/v1/completions" -H "$json" -d "$ask" >"$tmp/after.json" ||
  fail "request after P0 died"
[ "$(value "$b" "worker_failures_total{pool=\"prefill\",worker=\"${url[P0]}\"}")" = 1 ] ||
  fail "phase 1 did not go to P0 first"
[ "$(value "$b" "worker_requests_total{pool=\"prefill\",worker=\"${url[P1]}\"}")" = 1 ] ||
  fail "not retried on P1"
[ "$(value "$b" retries_total)" -ge 1 ] || fail "no retry counted"

# 3b. A transfer that fails: PX advertises a state-transfer address nothing listens on, so D0
#     answers 502 kv_transfer_failed; the router retries the pair with P1 and answers the
#     reference's tokens.
start PX --role prefill --disagg-advertise-host 127.0.0.2
wait_health PX
start_router X --health-timeout-s 3 --prefill "${url[PX]}" "${url[P1]}" --decode "${url[D0]}" \
  --prefill-policy round_robin --health-interval-s 60
x="${url[X]}"
greedy='{"prompt": "Transfer retried", "max_tokens": 8, "temperature": 0, "logprobs": 1}'
curl -sf --max-time 60 "$x/v1/completions" -H "$json" -d "$greedy" >"$tmp/x_r.json" ||
  fail "request whose first transfer fails"
curl -sf "${url[REF]}/v1/completions" -H "$json" -d "$greedy" >"$tmp/x_d.json" || fail "reference"
[ "$(value "$x" pd_transfer_failures_total)" = 1 ] || fail "transfer failure not counted"
[ "$(value "$x" "worker_requests_total{pool=\"prefill\",worker=\"${url[P1]}\"}")" = 1 ] ||
  fail "the pair was not retried with P1"
python3 - "$tmp/x_r.json" "$tmp/x_d.json" <<'PY' || fail "retried pair's answer differs from the reference"
import json, sys
r, d = (json.load(open(p)) for p in sys.argv[1:])
assert r["choices"] == d["choices"] and r["usage"] == d["usage"], (r, d)
PY

# 4. The decode worker of a long stream dies mid-stream.
longreq='{"prompt": "A long one", "max_tokens": 60000, "ignore_eos": true, "stream": true}'
curl -sN --max-time 30 "$b/v1/completions" -H "$json" -d "$longreq" >"$tmp/mid.txt" &
cpid=$!
for _ in $(seq 1 200); do grep -q '^data: {' "$tmp/mid.txt" 2>/dev/null && break; sleep 0.05; done
victim=""
for w in D0 D1; do
  [ "$(value "$b" "worker_outstanding_requests{pool=\"decode\",worker=\"${url[$w]}\"}")" = 1 ] && victim=$w
done
[ -n "$victim" ] || fail "no decode worker has the stream"
kill -9 "${pid[$victim]}"
wait "${pid[$victim]}" 2>/dev/null
wait "$cpid" || fail "the client of the killed stream saw curl rc $?"
python3 - "$tmp/mid.txt" <<'PY' || fail "not a clean error event: $(tail -c 400 "$tmp/mid.txt")"
import json, sys
blocks = open(sys.argv[1]).read().split("\n\n")
assert blocks[-1] == "" and blocks[-2] == "data: [DONE]", blocks[-3:]
err = json.loads(blocks[-3][6:])["error"]
assert err["code"] == "worker_failed" and "mid-stream" in err["message"], err
for b in blocks[:-3]:
    assert "choices" in json.loads(b[6:]), b
PY
curl -sf --max-time 30 "$b/v1/completions" -H "$json" -d "$ask" >/dev/null ||
  fail "request after the decode worker died"

# 5. A worker started with --register-with joins a registration-only PD router on both sides,
#    serves, and leaves when it drains.
start_router C --health-timeout-s 3 --pd --allow-register --health-interval-s 0.3
c="${url[C]}"
start REG --role both --register-with "$c"
reg="${url[REG]}"
for _ in $(seq 1 200); do
  [ "$(value "$c" "worker_registered{pool=\"decode\",worker=\"$reg\"}")" = 1 ] && break
  sleep 0.1
done
for side in prefill decode; do
  [ "$(value "$c" "worker_registered{pool=\"$side\",worker=\"$reg\"}")" = 1 ] ||
    fail "--register-with worker not on the $side side"
done
wait_health REG
curl -sf --max-time 30 "$c/v1/completions" -H "$json" -d "$ask" >/dev/null || fail "request via registration"
[ "$(value "$c" 'pd_plain_total{reason="same_worker"}')" = 1 ] || fail "registered both worker not used"
kill -TERM "${pid[REG]}"
wait "${pid[REG]}" 2>/dev/null
[ "$(value "$c" "worker_registered{pool=\"prefill\",worker=\"$reg\"}")" = 0 ] ||
  fail "a drained worker is still registered"
[ "$(value "$c" 'workers_left_total{pool="prefill"}')" = 1 ] || fail "leave not counted"
echo "PASS router pd"

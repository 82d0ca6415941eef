#!/usr/bin/env bash
# Prefill/decode disaggregation at the workers, without a router (the router's PD mode is
# router_pd.sh): a prefill worker (`serve --role prefill`) answers the prefill phase with a
# handoff token, a decode worker (`--role decode`) fetches the state over TCP and answers; both
# phases by hand with curl, against a plain `serve` (role both) as the reference:
#   1. greedy chat with logprobs, seeded completions streamed, a long prompt twice (its cache
#      hit reported by the decode side): choices, per-token logprobs and usage equal the
#      reference's;
#   2. a token fetched once is gone (502 kv_transfer_failed), a malformed token 400, a prefill
#      phase at a decode worker and a decode phase at a prefill worker 400 disagg_role, n = 2
#      gets "handoff": null;
#   3. a prefill worker that corrupts a chunk on the wire (--debug-corrupt-transfer-chunk 0): the
#      decode side detects it, fetches it again and answers the reference's tokens; the same
#      over UCX (--disagg-transport ucx);
#   4. a prefill worker killed before the fetch: 502 kv_transfer_failed, and the decode worker
#      serves the next request; GET /load; --register-with a closed port logs once and serves.
# Usage: serve_disagg_smoke.sh path/to/deepinfer
set -u
bin="$1"
source "$(dirname "$0")/servers_helpers.sh"
dead_port=$(free_port)
start REF
start P --role prefill
start D --role decode --register-with "http://127.0.0.1:$dead_port"
start PC --role prefill --debug-corrupt-transfer-chunk 0
start PU --role prefill --disagg-transport ucx
for w in REF P D PC PU; do wait_health "$w"; done

post() {  # URL PATH BODY [HEADER...]: the body to stdout, the status to $tmp/status
  local u="$1" path="$2" body="$3"
  shift 3
  local args=()
  for h in "$@"; do args+=(-H "$h"); done
  curl -s -o "$tmp/out" -w '%{http_code}' -H 'Content-Type: application/json' "${args[@]}" \
    -d "$body" "$u$path" >"$tmp/status"
  cat "$tmp/out"
}
handoff() {  # PREFILL PATH BODY: the token
  post "${url[$1]}" "$2" "$3" 'X-Deepinfer-Disagg: prefill' >"$tmp/h.json"
  [ "$(cat "$tmp/status")" = 200 ] || fail "prefill phase at $1: $(cat "$tmp/status") $(cat "$tmp/h.json")"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["handoff"])' "$tmp/h.json"
}
decode() {  # DECODE PATH BODY TOKEN
  post "${url[$1]}" "$2" "$3" 'X-Deepinfer-Disagg: decode' "X-Deepinfer-Handoff: $4"
}
# Choices and usage of two answers (JSON or SSE) must be equal (ids and timestamps aside).
same() {  # FILE_A FILE_B WHAT
  python3 - "$1" "$2" "$3" <<'PY' || fail "$3: the decode worker's answer differs from the reference's"
import json, sys
def load(path):
    text = open(path).read()
    if not text.startswith("data:"):
        j = json.loads(text)
        return j["choices"], j["usage"]
    chunks = [json.loads(l[5:]) for l in text.splitlines() if l.startswith("data:") and l[5:].strip() != "[DONE]"]
    choices = [c["choices"] for c in chunks if c.get("choices")]
    usage = [c["usage"] for c in chunks if c.get("usage")]
    return choices, usage
a, b = load(sys.argv[1]), load(sys.argv[2])
if a != b:
    print(sys.argv[3], "reference:", json.dumps(a)[:600])
    print(sys.argv[3], "disaggregated:", json.dumps(b)[:600])
    sys.exit(1)
PY
}

# 1. Identity.
chat='{"messages":[{"role":"user","content":"Hello there, how are you?"}],"max_tokens":24,"temperature":0,"logprobs":true,"top_logprobs":2}'
post "${url[REF]}" /v1/chat/completions "$chat" >"$tmp/ref1"
decode D /v1/chat/completions "$chat" "$(handoff P /v1/chat/completions "$chat")" >"$tmp/got1"
[ "$(cat "$tmp/status")" = 200 ] || fail "decode phase: $(cat "$tmp/status") $(cat "$tmp/got1")"
same "$tmp/ref1" "$tmp/got1" "greedy chat"

comp='{"prompt":"The quick brown fox","max_tokens":20,"temperature":0.9,"seed":7,"logprobs":1,"stream":true,"stream_options":{"include_usage":true}}'
post "${url[REF]}" /v1/completions "$comp" >"$tmp/ref2"
decode D /v1/completions "$comp" "$(handoff P /v1/completions "$comp")" >"$tmp/got2"
same "$tmp/ref2" "$tmp/got2" "seeded streamed completions"

long=$(python3 -c 'import json; print(json.dumps({"prompt": " ".join(f"word{i}" for i in range(300)), "max_tokens": 8, "temperature": 0}))')
post "${url[REF]}" /v1/completions "$long" >/dev/null
post "${url[REF]}" /v1/completions "$long" >"$tmp/ref3"
decode D /v1/completions "$long" "$(handoff P /v1/completions "$long")" >/dev/null
token=$(handoff P /v1/completions "$long")
grep -q '"cached_tokens":[1-9]' "$tmp/h.json" || fail "the repeated prompt did not hit the prefill's cache: $(cat "$tmp/h.json")"
decode D /v1/completions "$long" "$token" >"$tmp/got3"
same "$tmp/ref3" "$tmp/got3" "a repeated long prompt (cache hit)"
echo "identity: ok"

# 2. Refusals.
decode D /v1/completions "$long" "$token" >"$tmp/again"
[ "$(cat "$tmp/status")" = 502 ] && grep -q kv_transfer_failed "$tmp/again" || fail "a fetched token was served twice: $(cat "$tmp/again")"
decode D /v1/completions "$long" "tcp://127.0.0.1:1/xyz" >"$tmp/bad"
[ "$(cat "$tmp/status")" = 400 ] && grep -q 'X-Deepinfer-Handoff' "$tmp/bad" || fail "malformed token: $(cat "$tmp/bad")"
post "${url[D]}" /v1/completions "$long" 'X-Deepinfer-Disagg: prefill' >"$tmp/role"
[ "$(cat "$tmp/status")" = 400 ] && grep -q disagg_role "$tmp/role" || fail "prefill phase at a decode worker: $(cat "$tmp/role")"
decode P /v1/completions "$long" "$token" >"$tmp/role"
[ "$(cat "$tmp/status")" = 400 ] && grep -q disagg_role "$tmp/role" || fail "decode phase at a prefill worker: $(cat "$tmp/role")"
post "${url[P]}" /v1/completions '{"prompt":"hi","max_tokens":3,"n":2}' 'X-Deepinfer-Disagg: prefill' >"$tmp/n2"
grep -q '"handoff":null' "$tmp/n2" || fail "n = 2 was disaggregated: $(cat "$tmp/n2")"
echo "refusals: ok"

# 3. A corrupted chunk.
decode D /v1/chat/completions "$chat" "$(handoff PC /v1/chat/completions "$chat")" >"$tmp/got4"
same "$tmp/ref1" "$tmp/got4" "a state with a corrupted chunk"
curl -s "${url[D]}/metrics" | grep -q '^deepinfer:disagg_corrupt_chunks_total{[^}]*} 1$' ||
  fail "the corrupt chunk was not counted"
curl -s "${url[PC]}/metrics" | grep -q '^deepinfer:disagg_transfer_resent_chunks_total{[^}]*} 1$' ||
  fail "the prefill worker did not resend the chunk"
echo "corrupt chunk: ok"
token=$(handoff PU /v1/chat/completions "$chat")
case "$token" in ucx://*) ;; *) fail "a --disagg-transport ucx worker handed out $token" ;; esac
decode D /v1/chat/completions "$chat" "$token" >"$tmp/got5"
same "$tmp/ref1" "$tmp/got5" "a state fetched over UCX"
echo "ucx: ok"

# 4. A prefill worker gone before the fetch; /load; registration with a dead router.
token=$(handoff P /v1/chat/completions "$chat")
kill -9 "${pid[P]}"
decode D /v1/chat/completions "$chat" "$token" >"$tmp/gone"
[ "$(cat "$tmp/status")" = 502 ] && grep -q kv_transfer_failed "$tmp/gone" || fail "a dead prefill worker: $(cat "$tmp/status") $(cat "$tmp/gone")"
post "${url[D]}" /v1/chat/completions "$chat" >"$tmp/plain"
same "$tmp/ref1" "$tmp/plain" "a plain request at the decode worker"
curl -s "${url[D]}/load" | python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["role"]=="decode" and j["num_running"]==0 and 0<=j["kv_usage"]<=1, j' ||
  fail "GET /load"
[ "$(grep -c 'registration with' "$tmp/D.log")" = 1 ] || fail "a dead router should cost one log line: $(grep registration "$tmp/D.log")"
echo "faults: ok"
echo "PASS"

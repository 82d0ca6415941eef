#!/usr/bin/env bash
# deepinfer serve end to end over loopback with curl: health, completions, streaming chat,
# models, auth, malformed JSON. Usage: serve_smoke.sh path/to/deepinfer
set -u
bin="$1"
tmp=$(mktemp -d)
export DEEPINFER_CACHE_DIR="$tmp/cache"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- server log"; tail -30 "$tmp/server.log"; exit 1; }

source "$(dirname "$0")/../cli/serve_helpers.sh"
key=test-key
start_server "$bin" --api-key "$key"
c() { curl -sS --max-time 60 "$@"; }

auth=(-H "Authorization: Bearer $key" -H "Content-Type: application/json")

# Non-streaming completion with every usage field.
c "${auth[@]}" -d '{"prompt":"Hello","max_tokens":4,"temperature":0}' "$base/v1/completions" \
  >"$tmp/cmpl.json" || fail "completion request"
python3 - "$tmp/cmpl.json" <<'PY' || fail "completion body: $(cat "$tmp/cmpl.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["object"] == "text_completion", r
assert isinstance(r["choices"][0]["text"], str)
u = r["usage"]
for k in ["prompt_tokens", "completion_tokens", "total_tokens", "prompt_cache_hit_tokens",
          "prompt_cache_miss_tokens"]:
    assert isinstance(u[k], int), k
assert u["prompt_tokens_details"]["cached_tokens"] >= 0
assert u["completion_tokens_details"]["reasoning_tokens"] >= 0
assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
assert 1 <= u["completion_tokens"] <= 4
PY

# Streaming chat with usage.
c -N "${auth[@]}" -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":5,
  "stream":true,"stream_options":{"include_usage":true},"unknown_field":1}' \
  "$base/v1/chat/completions" >"$tmp/stream.txt" || fail "streaming chat request"
python3 - "$tmp/stream.txt" <<'PY' || fail "stream body: $(cat "$tmp/stream.txt")"
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l.strip()]
assert lines[-1] == "data: [DONE]", lines[-1]
chunks = [json.loads(l[len("data: "):]) for l in lines[:-1]]
assert all(l.startswith("data: ") for l in lines)
assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
assert all(c["object"] == "chat.completion.chunk" for c in chunks)
finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
assert finishes[-1] in ("stop", "length", "tool_calls"), finishes
assert chunks[-1]["choices"] == [] and "usage" in chunks[-1]
PY

# Models.
c "${auth[@]}" "$base/v1/models" | python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["object"]=="list" and r["data"][0]["id"]' \
  || fail "/v1/models"

# Auth: missing key 401, health stays open.
code=$(curl -s -o "$tmp/401.json" -w '%{http_code}' --max-time 10 "$base/v1/models")
[ "$code" = 401 ] || fail "no key gave $code"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["error"]["type"]' "$tmp/401.json" \
  || fail "401 body"

# Malformed JSON 400, wrong type names the field, unknown route 404.
code=$(c -o "$tmp/400.json" -w '%{http_code}' "${auth[@]}" -d '{"prompt": ' "$base/v1/completions")
[ "$code" = 400 ] || fail "malformed JSON gave $code"
python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert e["message"]' "$tmp/400.json" \
  || fail "400 body"
code=$(c -o "$tmp/400b.json" -w '%{http_code}' "${auth[@]}" -d '{"prompt":"a","temperature":"x"}' \
  "$base/v1/completions")
[ "$code" = 400 ] || fail "wrong type gave $code"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["error"]["param"]=="temperature"' \
  "$tmp/400b.json" || fail "param not named: $(cat "$tmp/400b.json")"
code=$(c -o /dev/null -w '%{http_code}' "${auth[@]}" "$base/nope")
[ "$code" = 404 ] || fail "unknown route gave $code"

# Body over the limit: 413.
head -c 9000000 /dev/zero | tr '\0' a >"$tmp/big.txt"
code=$(c -o /dev/null -w '%{http_code}' "${auth[@]}" --data-binary @"$tmp/big.txt" "$base/v1/completions")
[ "$code" = 413 ] || fail "huge body gave $code"

# A client dropping a long stream must not hurt the server (the engine request is cancelled).
curl -sN --max-time 1 "${auth[@]}" -d '{"prompt":"Hi","max_tokens":60000,"stream":true,"ignore_eos":true}' \
  "$base/v1/completions" >/dev/null 2>&1
c "${auth[@]}" -d '{"prompt":"Hi","max_tokens":2}' "$base/v1/completions" | grep -q '"text_completion"' \
  || fail "request after a client disconnect"

kill "$pid"
for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
kill -0 "$pid" 2>/dev/null && fail "server did not exit on SIGTERM"
wait "$pid"; rc=$?; pid=""
[ $rc = 0 ] || fail "server exit code $rc"
echo "PASS"

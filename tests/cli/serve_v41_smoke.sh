#!/usr/bin/env bash
# deepinfer serve on a deepseek_v41 model (make-tiny-model v41-default) on the CPU, over loopback:
# a chat request in thinking mode through the V4.1 recipe (reasoning_content), and a forced tool
# call whose grammar-constrained DSML output comes back as a parsed tool call with JSON
# arguments. Usage: serve_v41_smoke.sh path/to/deepinfer [serve flags...] (the GPU machine runs
# it with --device cuda).
set -u
bin="$1"
shift
tmp=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
unset DEEPINFER_HF_MODEL_DIR
fail() { echo "FAIL: $*"; echo "--- server log"; tail -30 "$tmp/server.log"; exit 1; }

"$bin" make-tiny-model "$tmp/m" --preset v41-default --seed 5 2>/dev/null || fail "make-tiny-model"
source "$(dirname "$0")/serve_helpers.sh"
start_server "$bin" "$tmp/m" "$@"
grep -q "numerics plain" "$tmp/server.log" || fail "V4.1 should serve plain numerics"
c() { curl -sS --max-time 120 -H "Content-Type: application/json" "$@"; }

# Thinking mode: the V4.1 recipe opens <think>, so the text comes back as reasoning_content.
c -d '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],
  "max_tokens":6,"temperature":0,"chat_template_kwargs":{"thinking":true}}' \
  "$base/v1/chat/completions" >"$tmp/think.json" || fail "thinking request"
python3 - "$tmp/think.json" <<'PY' || fail "thinking body: $(cat "$tmp/think.json")"
import json, sys
r = json.load(open(sys.argv[1]))
m = r["choices"][0]["message"]
assert m["role"] == "assistant", m
assert isinstance(m.get("reasoning_content"), str) and m["reasoning_content"], m
assert r["usage"]["completion_tokens"] == 6 or r["choices"][0]["finish_reason"] == "stop", r
PY

# A forced tool call: the grammar makes the random model write a valid V4.1 DSML call (an enum
# keeps the argument short, so the call ends well before max_tokens).
c -d '{"messages":[{"role":"user","content":"Weather in Paris?"}],"max_tokens":200,
  "temperature":0,"tools":[{"type":"function","function":{"name":"get_weather",
  "parameters":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Rome"]}},"required":["city"]}}}],
  "tool_choice":{"type":"function","function":{"name":"get_weather"}}}' \
  "$base/v1/chat/completions" >"$tmp/tool.json" || fail "tool request"
python3 - "$tmp/tool.json" <<'PY' || fail "tool body: $(cat "$tmp/tool.json")"
import json, sys
r = json.load(open(sys.argv[1]))
ch = r["choices"][0]
calls = ch["message"].get("tool_calls") or []
assert ch["finish_reason"] == "tool_calls", ch
assert len(calls) >= 1 and calls[0]["function"]["name"] == "get_weather", calls
args = json.loads(calls[0]["function"]["arguments"])
assert args == {"city": "Paris"} or args == {"city": "Rome"}, args
PY
echo PASS

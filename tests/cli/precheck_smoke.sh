#!/usr/bin/env bash
# deepinfer precheck on this machine (CI has no GPU: it warns, and passes): its JSON report, a
# model that fits, a Redis that answers (a real redis-server on loopback) and one that does not.
set -euo pipefail
bin=$1
tmp=$(mktemp -d)
redis_pid=""
cleanup() { [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" precheck > "$tmp/text.out" || fail "precheck failed on this machine: $(cat "$tmp/text.out")"
grep -qE '^(pass|warn)  cmake: ' "$tmp/text.out" || fail "no cmake line: $(cat "$tmp/text.out")"
grep -qE '^(pass|warn)  gpu' "$tmp/text.out" || fail "no gpu line"

"$bin" make-tiny-model "$tmp/m" --quantized 2>/dev/null
"$bin" precheck --json --model "$tmp/m" --device cpu > "$tmp/model.json" ||
  fail "a tiny model does not fit? $(cat "$tmp/model.json")"
python3 - "$tmp/model.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"] is True, r
names = {c["name"]: c for c in r["checks"]}
assert names["model"]["status"] == "pass", names
assert names["host memory"]["status"] == "pass", names
assert all(c["status"] in ("pass", "warn", "fail") for c in r["checks"])
PY

if "$bin" precheck --model "$tmp/nope" > "$tmp/missing.out"; then fail "a missing model passed"; fi
grep -q '^fail  model: ' "$tmp/missing.out" || fail "missing model not named: $(cat "$tmp/missing.out")"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
if "$bin" precheck --kv-cluster-redis "redis://127.0.0.1:$port" > "$tmp/redis.out"; then
  fail "an unreachable Redis passed"
fi
grep -q '^fail  redis: .*not reachable' "$tmp/redis.out" || fail "$(cat "$tmp/redis.out")"
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no > "$tmp/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 50); do "$bin" precheck --kv-cluster-redis "redis://127.0.0.1:$port" > "$tmp/redis.out" && break; sleep 0.1; done
grep -q '^pass  redis: .*answers PING' "$tmp/redis.out" || fail "$(cat "$tmp/redis.out")"
echo "precheck smoke: ok"

#!/usr/bin/env bash
# --device / DEEPINFER_ACCELERATOR / --gpu-memory-utilization on the engine commands: bad values
# fail naming the flag or variable, every engine command's --help lists the flags, and a binary
# without the CUDA backend says so for --device cuda. Usage: device_flags_smoke.sh BIN cpu|cuda
# (cuda: this binary was built with the CUDA backend).
set -euo pipefail
bin=$1
backend=${2:-cpu}
source "$(dirname "$0")/smoke_env.sh"
unset DEEPINFER_ACCELERATOR
passed=0
ok() { passed=$((passed + 1)); }

# Runs the command, which must fail; its stderr + stdout end up in $err.
must_fail() {
  if err=$("$@" 2>&1); then fail "expected failure: $*"; fi
}

for cmd in generate chat serve bench; do
  help=$("$bin" $cmd --help)
  for flag in --device --gpu-memory-utilization --no-cuda-graphs --numerics; do
    grep -q -- "$flag" <<<"$help" || fail "$cmd --help does not list $flag"
  done
  grep -q "DEEPINFER_ACCELERATOR" <<<"$help" ||
    fail "$cmd --help does not name DEEPINFER_ACCELERATOR"
  ok
done

must_fail "$bin" generate -q --prompt-ids 1 --device bogus
grep -q -- "--device" <<<"$err" && grep -q "bogus" <<<"$err" || fail "--device bogus: $err"
ok
must_fail env DEEPINFER_ACCELERATOR=bogus "$bin" generate -q --prompt-ids 1 --max-tokens 1
grep -q "DEEPINFER_ACCELERATOR" <<<"$err" && grep -q "bogus" <<<"$err" ||
  fail "DEEPINFER_ACCELERATOR=bogus: $err"
ok
for v in 0 1.5 -1 x; do
  must_fail "$bin" generate -q --prompt-ids 1 --gpu-memory-utilization "$v"
  grep -q -- "--gpu-memory-utilization" <<<"$err" || fail "--gpu-memory-utilization $v: $err"
done
ok
must_fail "$bin" generate -q --prompt-ids 1 --numerics fast
grep -q -- "--numerics" <<<"$err" || fail "--numerics fast: $err"
ok

# cpu, also when spelled by the variable, and --device wins over the variable.
out=$(DEEPINFER_ACCELERATOR=cpu "$bin" generate -q --prompt-ids 1,2,3 --max-tokens 2)
grep -qE '^[0-9]+,[0-9]+$' <<<"$out" || fail "DEEPINFER_ACCELERATOR=cpu: '$out'"
out=$(DEEPINFER_ACCELERATOR=bogus "$bin" generate -q --device cpu --prompt-ids 1,2,3 --max-tokens 2)
grep -qE '^[0-9]+,[0-9]+$' <<<"$out" || fail "--device cpu over a bad variable: '$out'"
ok
# The capacity line every engine command prints at start-up.
err=$("$bin" generate --device cpu --prompt-ids 1,2,3 --max-tokens 2 2>&1 >/dev/null)
line="deepinfer generate: device cpu, numerics official, weights [0-9.]+ GiB; KV pool [0-9]+ pages"
grep -qE "$line" <<<"$err" ||
  fail "capacity line: $err"
ok

if [ "$backend" = cpu ]; then
  no_cuda="built without the CUDA backend"
  must_fail "$bin" generate -q --prompt-ids 1 --device cuda
  grep -q "$no_cuda" <<<"$err" || fail "generate --device cuda: $err"
  must_fail env DEEPINFER_ACCELERATOR=nvidia "$bin" generate -q --prompt-ids 1
  grep -q "$no_cuda" <<<"$err" || fail "DEEPINFER_ACCELERATOR=nvidia: $err"
  must_fail "$bin" chat --device cuda </dev/null
  grep -q "$no_cuda" <<<"$err" || fail "chat --device cuda: $err"
  must_fail "$bin" serve --device cuda --host 127.0.0.1 --port 0
  grep -q "$no_cuda" <<<"$err" || fail "serve --device cuda: $err"
  must_fail "$bin" bench latency --device cuda --output-json "$tmp/b.json"
  grep -q "$no_cuda" <<<"$err" || fail "bench latency --device cuda: $err"
  must_fail "$bin" bench forward --device cuda --output-json "$tmp/b.json"
  grep -q "$no_cuda" <<<"$err" || fail "bench forward --device cuda: $err"
  ok
fi

must_fail "$bin" bench forward --device cpu
grep -q "needs --device cuda" <<<"$err" || fail "bench forward on cpu: $err"
must_fail "$bin" bench latency --device cpu --batch-sizes 8
grep -q -- "--batch-sizes is a 'bench forward' flag" <<<"$err" ||
  fail "bench latency --batch-sizes: $err"
ok
"$bin" bench latency --device cpu --input-len 8 --output-len 4 --output-json "$tmp/b.json" \
  >/dev/null 2>&1 || fail "bench latency on cpu"
"$bin" bench latency --device cpu --input-len 8 --output-len 4 --warmup-requests 2 \
  --output-json "$tmp/w.json" >/dev/null 2>&1 || fail "bench latency --warmup-requests 2"
python3 - "$tmp/b.json" "$tmp/w.json" <<'PY' || fail "bench JSON fields"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["device"] == "cpu" and j["decode_batch"] == 1, j
assert all(k in j for k in ("device_name", "numerics", "weight_bytes", "decode_step_floor_ms")), j
assert j["warmup_request_sets"] == 0, j  # none by default on cpu
# Warm-up sets are discarded: the figures count the measured set's steps alone.
w = json.load(open(sys.argv[2]))
assert w["warmup_request_sets"] == 2 and w["steps"] == j["steps"] and j["steps"] > 0, (j, w)
PY
ok
must_fail "$bin" bench latency --device cpu --warmup-requests -1
grep -q -- "--warmup-requests" <<<"$err" || fail "--warmup-requests -1: $err"
ok
echo "device flags smoke: $passed passed, 0 failed"

#!/usr/bin/env bash
# The README's main job, end to end: `deepinfer generate` on the embedded default model, created
# in a fresh cache dir on first use and reused on the second run. Also make-tiny-model and the
# errors a user sees for bad input.
set -euo pipefail
bin=$1
source "$(dirname "$0")/smoke_env.sh"

out1=$("$bin" generate -q --prompt-ids 1,2,3 --max-tokens 16)
[ -f "$tmp/cache/tiny-default-v1/READY" ] || fail "default model not created in the cache dir"
n=$(echo "$out1" | tr ',' '\n' | grep -cE '^[0-9]+$')
[ "$n" -eq 16 ] || fail "expected 16 generated ids, got '$out1'"
for id in $(echo "$out1" | tr ',' ' '); do [ "$id" -lt 129280 ] || fail "id $id out of vocab"; done
out2=$("$bin" generate -q --prompt-ids 1,2,3 --max-tokens 16)
[ "$out1" = "$out2" ] || fail "greedy output changed between runs: '$out1' vs '$out2'"

text=$("$bin" generate -q --prompt "Hello" --max-tokens 4)
[ -n "$text" ] || fail "--prompt produced no text"

"$bin" make-tiny-model "$tmp/m" --preset csa --quantized --seed 7 2>/dev/null
ls "$tmp/m"/model-0000*-of-*.safetensors >/dev/null || fail "make-tiny-model wrote no shards"
[ -f "$tmp/m/model.safetensors.index.json" ] || fail "no index.json"
[ -f "$tmp/m/tokenizer.json" ] || fail "no tokenizer copied"
"$bin" generate -q "$tmp/m" --prompt-ids 5,6,7,8,9 --max-tokens 3 --numerics plain | grep -qE '^[0-9]+,[0-9]+,[0-9]+$' ||
  fail "generate on a quantized tiny model"

err=$("$bin" generate -q --prompt-ids 1,abc 2>&1 || true)
grep -q "'abc' is not a token id" <<<"$err" || fail "bad id error: $err"
err=$("$bin" generate -q "$tmp/nope" --prompt-ids 1 2>&1 || true)
grep -q "$tmp/nope/config.json" <<<"$err" || fail "missing model error: $err"
err=$("$bin" generate -q --prompt-ids 999999 2>&1 || true)
grep -q "token id 999999 is outside the vocabulary" <<<"$err" || fail "vocab error: $err"
err=$("$bin" generate -q --prompt-ids 1 --numerics fast 2>&1 || true)
grep -q -- "--numerics: fast not in" <<<"$err" || fail "numerics error: $err"
# A prompt the KV pool can never hold: the engine takes it, then ends it; the reason is printed
# and the exit status is not 0 (it once printed only "finish_reason=abort" and exited 0).
if err=$("$bin" generate --kv-memory 200000 --prompt-ids "$(seq -s, 2 900)" --max-tokens 4 2>&1); then
  fail "a prompt larger than the pool exited 0: $err"
fi
grep -q "raise --kv-memory" <<<"$err" || fail "pool error: $err"
echo "generate smoke: 10 passed, 0 failed"

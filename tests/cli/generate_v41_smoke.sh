#!/usr/bin/env bash
# deepinfer generate on a deepseek_v41 model end to end on the CPU: make-tiny-model's v41-default
# preset (with the bundled tokenizer), greedy ids that are the same whether a prefix was decoded or
# prefilled, text from --prompt, and V4.1's numerics rule at the CLI.
set -euo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset DEEPINFER_HF_MODEL_DIR
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" make-tiny-model "$tmp/m" --preset v41-default --seed 3 2>/dev/null
grep -q '"model_type": "deepseek_v41"' "$tmp/m/config.json" || fail "not a deepseek_v41 config"
[ -f "$tmp/m/tokenizer.json" ] || fail "no tokenizer copied"
vocab=$(grep -oE '"vocab_size": [0-9]+' "$tmp/m/config.json" | grep -oE '[0-9]+')

out1=$("$bin" generate -q "$tmp/m" --prompt-ids 5,6,7,8,9 --max-tokens 6)
n=$(echo "$out1" | tr ',' '\n' | grep -cE '^[0-9]+$')
[ "$n" -eq 6 ] || fail "expected 6 generated ids, got '$out1'"
for id in $(echo "$out1" | tr ',' ' '); do [ "$id" -lt "$vocab" ] || fail "id $id out of vocab"; done

# The first three generated ids prefilled with the prompt must lead to the same last three.
first3=$(echo "$out1" | cut -d, -f1-3)
last3=$(echo "$out1" | cut -d, -f4-6)
out3=$("$bin" generate -q "$tmp/m" --prompt-ids "5,6,7,8,9,$first3" --max-tokens 3)
[ "$out3" = "$last3" ] || fail "prefill of decoded ids diverged: '$out3' vs '$last3'"

text=$("$bin" generate -q "$tmp/m" --prompt "Hello" --max-tokens 4)
[ -n "$text" ] || fail "--prompt produced no text"

err=$("$bin" generate -q "$tmp/m" --prompt-ids 1 --numerics official 2>&1 || true)
grep -q -- "--numerics official" <<<"$err" || fail "official numerics error: $err"
echo "generate v41 smoke: 4 passed, 0 failed"

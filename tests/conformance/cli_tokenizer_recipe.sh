#!/usr/bin/env bash
# The CLI surface of issue 3 against the shared conformance vectors:
# deepinfer tokenize [--no-special] [--decode], recipe encode, recipe parse [--stream].
set -euo pipefail
bin=$1
shared=$2
tok=$shared/tokenizers/deepseek_v3
conf=$shared/conformance
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 - "$conf" "$tmp" <<'PY'
import json, sys
conf, tmp = sys.argv[1], sys.argv[2]
tv = [json.loads(l) for l in open(f"{conf}/tokenizer_deepseek_v3.jsonl")]
with open(f"{tmp}/text.jsonl", "w") as f:
    for v in tv: f.write(json.dumps({"text": v["text"]}) + "\n")
with open(f"{tmp}/ids.jsonl", "w") as f:
    for v in tv: f.write(json.dumps({"ids": v["ids"]}) + "\n")
ev = [json.loads(l) for l in open(f"{conf}/chat_encoding.jsonl")]
with open(f"{tmp}/req.jsonl", "w") as f:
    for v in ev: f.write(json.dumps(v["request"]) + "\n")
pv = [json.loads(l) for l in open(f"{conf}/chat_parsing.jsonl")]
with open(f"{tmp}/comp.jsonl", "w") as f:
    for v in pv:
        f.write(json.dumps({"completion_text": v["completion_text"],
                            "thinking_mode": v["thinking_mode"]}) + "\n")
PY

"$bin" tokenize --tokenizer "$tok" < "$tmp/text.jsonl" > "$tmp/ids.out"
"$bin" tokenize --tokenizer "$tok" --no-special < "$tmp/text.jsonl" > "$tmp/ids_ns.out"
"$bin" tokenize --tokenizer "$tok" --decode < "$tmp/ids.jsonl" > "$tmp/text.out"
"$bin" recipe encode < "$tmp/req.jsonl" > "$tmp/prompt.out"
# Malformed completions make both parsers exit 1 after writing {"error": ...} lines.
"$bin" recipe parse < "$tmp/comp.jsonl" > "$tmp/parse.out" || true
"$bin" recipe parse --stream < "$tmp/comp.jsonl" > "$tmp/stream.out" || true

python3 - "$conf" "$tmp" <<'PY'
import json, sys
conf, tmp = sys.argv[1], sys.argv[2]
def lines(p): return [json.loads(l) for l in open(p)]
tv = lines(f"{conf}/tokenizer_deepseek_v3.jsonl")
fails = 0
checks = 0
for name, got in [("ids", lines(f"{tmp}/ids.out")), ("ids_no_special", lines(f"{tmp}/ids_ns.out"))]:
    assert len(got) == len(tv), name
    for v, g in zip(tv, got):
        checks += 1
        fails += g.get("ids") != v[name]
for v, g in zip(tv, lines(f"{tmp}/text.out")):
    checks += 1
    fails += g.get("text") != v["text"]
ev = lines(f"{conf}/chat_encoding.jsonl")
got = lines(f"{tmp}/prompt.out")
assert len(got) == len(ev)
for v, g in zip(ev, got):
    checks += 1
    fails += g.get("prompt") != v["prompt"]
pv = lines(f"{conf}/chat_parsing.jsonl")
for mode in ("parse", "stream"):
    got = lines(f"{tmp}/{mode}.out")
    assert len(got) == len(pv), mode
    for v, g in zip(pv, got):
        if v.get("expected_error"):  # the streaming parser flags them too (audit, issue 21)
            checks += 1
            fails += "error" not in g
            continue
        checks += 1
        fails += g != v["expected"]
print(f"{checks - fails} passed, {fails} failed")
sys.exit(1 if fails else 0)
PY

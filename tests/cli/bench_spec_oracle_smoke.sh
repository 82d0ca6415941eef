#!/usr/bin/env bash
# deepinfer bench throughput --spec-oracle-accept on the embedded default model (CPU): the table
# and the JSON carry each rate's wall and decode (TPOT) figures, every output equals the run
# without drafts, full acceptance takes fewer engine steps than plain decoding, and a rate out of
# [0, 1] is refused naming the flag. No timing is asserted.
set -euo pipefail
bin=$1
source "$(dirname "$0")/smoke_env.sh"

"$bin" bench throughput --num-prompts 3 --input-len 16 --output-len 12 \
  --spec-oracle-accept 0,1 --output-json "$tmp/b.json" > "$tmp/out.txt" 2> "$tmp/err.txt" ||
  fail "bench exited $?: $(tail -5 "$tmp/err.txt")"
grep -q '| acceptance | wall s | output tok/s | wall speed-up | TPOT ms | decode speed-up |' \
  "$tmp/out.txt" || fail "no oracle table: $(cat "$tmp/out.txt")"
python3 - "$tmp/b.json" <<'PY' || fail "JSON: $(cat "$tmp/b.json")"
import json, sys
s = json.load(open(sys.argv[1]))["spec_oracle"]
assert s["off_tpot_ms"] > 0, s
rows = {r["accept_rate"]: r for r in s["rows"]}
assert sorted(rows) == [0.0, 1.0], rows.keys()
for r in rows.values():
    assert r["outputs_as_without_drafts"] is True, r
    assert r["tpot_ms"] > 0 and r["decode_speedup"] > 0 and r["speedup"] > 0, r
    assert len(r["acceptance_by_position"]) == 5, r
assert rows[0.0]["accepted_tokens"] == 0, rows[0.0]
assert rows[1.0]["accepted_tokens"] == rows[1.0]["draft_tokens"] > 0, rows[1.0]
assert rows[1.0]["steps"] < s["off_steps"], (rows[1.0]["steps"], s["off_steps"])
PY

err=$("$bin" bench throughput --num-prompts 1 --input-len 8 --output-len 2 \
  --spec-oracle-accept 1.5 2>&1 || true)
grep -q -- "--spec-oracle-accept 1.5.*rates are in \[0, 1\]" <<<"$err" || fail "rate error: $err"
echo PASS

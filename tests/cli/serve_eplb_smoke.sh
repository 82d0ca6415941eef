#!/usr/bin/env bash
# EPLB through the CLI (issue 22, CPU), end to end on the embedded tiny model:
#   1. a one-rank server counts its routed picks (GET /expert_counts);
#   2. `deepinfer eplb plan` turns them into a 2-rank plan with redundant copies (checked here in
#      Python: exact slots per rank, every expert placed, no expert twice on a rank, a replica);
#   3. two `serve --eplb-plan` ranks give the one-rank server's tokens;
#   4. refusals: sizes that do not split, a malformed plan and one for another shape (both
#      ranks exit naming the field), a plan without a group.
# Usage: serve_eplb_smoke.sh path/to/deepinfer
set -u
bin="$1"
source "$(dirname "$0")/servers_helpers.sh"

"$bin" eplb plan --help | grep -q -- "--redundant" || fail "eplb plan --help"
start REF
wait_health REF
chat='{"messages":[{"role":"user","content":"Tell me about experts."}],"max_tokens":16,"temperature":0,"logprobs":true}'
comp='{"prompt":"Once upon a time","max_tokens":16,"temperature":0.8,"seed":3,"logprobs":1}'
want_chat=$(tokens "${url[REF]}" /v1/chat/completions "$chat")
want_comp=$(tokens "${url[REF]}" /v1/completions "$comp")

curl -s --max-time 10 "${url[REF]}/expert_counts" >"$tmp/counts.json"
python3 - "$tmp/counts.json" <<'PY' || fail "counts: $(cat "$tmp/counts.json")"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["num_layers"] == len(c["counts"]) > 0
assert all(len(l) == c["num_experts"] for l in c["counts"])
assert all(sum(l) > 0 for l in c["counts"]), "a layer counted nothing"
PY
experts=$(python3 -c "import json; print(json.load(open('$tmp/counts.json'))['num_experts'])")
redundant=$((experts % 2 == 0 ? 2 : 1))  # at least one replica, slots split evenly over 2 ranks
"$bin" eplb plan --counts "$tmp/counts.json" --ranks 2 --redundant "$redundant" \
  -o "$tmp/plan.json" 2>"$tmp/plan.err" || fail "eplb plan: $(cat "$tmp/plan.err")"
grep -q "busiest rank" "$tmp/plan.err" || fail "no summary: $(cat "$tmp/plan.err")"
python3 - "$tmp/counts.json" "$tmp/plan.json" "$redundant" <<'PY' || fail "plan: $(cat "$tmp/plan.json")"
import json, sys
c, p, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
e = c["num_experts"]
assert p["num_layers"] == c["num_layers"] and p["num_experts"] == e and p["num_ranks"] == 2
assert p["slots_per_rank"] * 2 == e + r
for layer in p["layers"]:
    assert len(layer) == 2
    for rank in layer:
        assert len(rank) == p["slots_per_rank"] and len(set(rank)) == len(rank)
    placed = layer[0] + layer[1]
    assert set(placed) == set(range(e)), "an expert has no replica"
    assert len(placed) > len(set(placed)), "no replica"
PY
echo "plan: ok"

group="127.0.0.1:$(free_port)"
start R0 --expert-parallel-size 2 --expert-parallel-rank 0 --expert-parallel-address "$group" \
  --eplb-plan "$tmp/plan.json"
start R1 --expert-parallel-size 2 --expert-parallel-rank 1 --expert-parallel-address "$group" \
  --eplb-plan "$tmp/plan.json"
for w in R0 R1; do wait_health "$w"; done
for rank in R0 R1; do
  got=$(tokens "${url[$rank]}" /v1/chat/completions "$chat")
  [ -n "$want_chat" ] && [ "$got" = "$want_chat" ] || fail "$rank chat: $got vs $want_chat"
  got=$(tokens "${url[$rank]}" /v1/completions "$comp")
  [ -n "$want_comp" ] && [ "$got" = "$want_comp" ] || fail "$rank completions: $got vs $want_comp"
done
echo "identity with a plan: ok"

# experts + 0 never splits over experts + 1 ranks.
"$bin" eplb plan --counts "$tmp/counts.json" --ranks $((experts + 1)) --redundant 0 \
  >/dev/null 2>"$tmp/e" && fail "uneven sizes accepted"
grep -q -- "--redundant 0" "$tmp/e" || fail "uneven: $(cat "$tmp/e")"

refused() {  # PLAN_FILE NEEDLE: two ranks given PLAN_FILE both exit, naming NEEDLE
  local g="127.0.0.1:$(free_port)" n
  for n in 0 1; do
    "$bin" serve --host 127.0.0.1 --port "$(free_port)" --expert-parallel-size 2 \
      --expert-parallel-rank "$n" --expert-parallel-address "$g" --eplb-plan "$1" \
      >"$tmp/bad$n.log" 2>&1 &
    pids+=("$!")
    eval "bad$n=\$!"
  done
  wait "$bad0" && fail "rank 0 served with $1"
  wait "$bad1"
  grep -q -- "$2" "$tmp/bad0.log" || fail "rank 0 does not name $2: $(tail -3 "$tmp/bad0.log")"
  tail -1 "$tmp/bad0.log"
}
python3 -c "
import json; p = json.load(open('$tmp/plan.json')); p['layers'][0][1] = p['layers'][0][1][:-1]
json.dump(p, open('$tmp/short.json', 'w'))
p = json.load(open('$tmp/plan.json')); p['num_layers'] += 1; p['layers'].append(p['layers'][0])
json.dump(p, open('$tmp/deeper.json', 'w'))"
refused "$tmp/short.json" "layers\[0\]\[1\]"
refused "$tmp/deeper.json" "num_layers"
"$bin" serve --port "$(free_port)" --eplb-plan "$tmp/plan.json" >"$tmp/alone.log" 2>&1 &&
  fail "a plan without a group was served"
grep -q -- "--expert-parallel-size" "$tmp/alone.log" || fail "alone: $(tail -3 "$tmp/alone.log")"
tail -1 "$tmp/alone.log"
echo "refusals: ok"
echo PASS

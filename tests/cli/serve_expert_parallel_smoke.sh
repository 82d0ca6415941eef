#!/usr/bin/env bash
# Expert parallelism through `deepinfer serve` (issue 22, CPU): two processes are ranks 0 and 1 of
# a group (--expert-parallel-size 2, each with half of the routed experts of the embedded tiny
# model and its own requests), beside a plain one-rank server as the reference:
#   1. greedy and seeded chat and completions at either rank give the reference's tokens;
#   2. rank 1 killed: rank 0's next request ends on an error naming the group, and no request
#      hangs.
# Usage: serve_expert_parallel_smoke.sh path/to/deepinfer
set -u
bin="$1"
source "$(dirname "$0")/servers_helpers.sh"
group="127.0.0.1:$(free_port)"
start REF
start R0 --expert-parallel-size 2 --expert-parallel-rank 0 --expert-parallel-address "$group"
start R1 --expert-parallel-size 2 --expert-parallel-rank 1 --expert-parallel-address "$group"
for w in REF R0 R1; do wait_health "$w"; done

chat='{"messages":[{"role":"user","content":"Tell me about experts."}],"max_tokens":16,"temperature":0,"logprobs":true}'
comp='{"prompt":"Once upon a time","max_tokens":16,"temperature":0.8,"seed":3,"logprobs":1}'
for rank in R0 R1; do
  for req in "/v1/chat/completions|$chat" "/v1/completions|$comp"; do
    path=${req%%|*}
    body=${req#*|}
    want=$(tokens "${url[REF]}" "$path" "$body")
    got=$(tokens "${url[$rank]}" "$path" "$body")
    [ -n "$want" ] && [ "$got" = "$want" ] || fail "$rank $path: $got vs the reference's $want"
  done
done
# Both ranks at once (their steps interleave in lockstep).
want=$(tokens "${url[REF]}" /v1/completions "$comp")
tokens "${url[R0]}" /v1/completions "$comp" >"$tmp/a" &
first=$!
tokens "${url[R1]}" /v1/completions "$comp" >"$tmp/b"
wait "$first"
[ "$(cat "$tmp/a")" = "$want" ] && [ "$(cat "$tmp/b")" = "$want" ] || fail "concurrent ranks differ"
echo "identity: ok"

kill -9 "${pid[R1]}"
code=$(curl -s -o "$tmp/err" -w '%{http_code}' --max-time 60 -H 'Content-Type: application/json' \
  -d "$comp" "${url[R0]}/v1/completions")
[ "$code" != 200 ] && [ "$code" != 000 ] || fail "rank 0 after rank 1 died: HTTP $code $(cat "$tmp/err")"
grep -q "expert-parallel" "$tmp/err" || fail "the error does not name the group: $(cat "$tmp/err")"
echo "rank lost: ok ($code)"
echo PASS

#!/usr/bin/env bash
# deepinfer router over two real workers (embedded tiny model, CPU, loopback) when one hangs:
#   1. worker 0 is stopped (SIGSTOP): a request the policy had sent to it times out there
#      (--worker-timeout-s) and is answered by worker 1, not lost;
#   2. the health checks eject worker 0 (/metrics), and requests after that all go to worker 1;
#   3. resumed (SIGCONT), it passes its checks and is readmitted.
# Usage: router_hang.sh path/to/deepinfer
set -u
bin="$1"
source "$(dirname "$0")/servers_helpers.sh"
metric() { router_value "$router" "$1{worker=\"$2\"}"; }  # NAME WORKER_URL
wait_metric() {  # NAME WORKER_URL VALUE: up to 20 s
  for _ in $(seq 1 200); do [ "$(metric "$1" "$2")" = "$3" ] && return 0; sleep 0.1; done
  fail "$1 of $2 never became $3 (is $(metric "$1" "$2"))"
}
json='Content-Type: application/json'
start W0
start W1
# The router starts once the workers are loaded, so no check ejects a loading one.
for w in W0 W1; do wait_health "$w"; done
start_router router --worker "${url[W0]}" "${url[W1]}" --policy round_robin \
  --health-interval-s 0.3 --health-timeout-s 2 --worker-timeout-s 4
router="${url[router]}"
wait_health router
for w in W0 W1; do wait_metric worker_healthy "${url[$w]}" 1; done
ask() {  # PROMPT -> HTTP code; the answer in $tmp/answer.json
  curl -s -o "$tmp/answer.json" -w '%{http_code}' --max-time 30 "$router/v1/completions" -H "$json" \
    -d "{\"prompt\": \"$1\", \"max_tokens\": 4, \"temperature\": 0}"
}
# Round robin: two requests leave its cursor on worker 0.
for n in 1 2; do [ "$(ask "warm $n")" = 200 ] || fail "warm-up $n"; done
[ "$(metric worker_requests_total "${url[W0]}")" = 1 ] || fail "worker 0 should have had 1 request"

# 1. Worker 0 hangs; the next request goes to it, times out, and is answered by worker 1.
kill -STOP "${pid[W0]}"
code=$(ask "while hung")
[ "$code" = 200 ] || fail "request to the hung worker: $code $(cat "$tmp/answer.json")"
python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); assert a["choices"][0]["text"] is not None' \
  "$tmp/answer.json" || fail "not an answer: $(cat "$tmp/answer.json")"
[ "$(metric worker_requests_total "${url[W0]}")" = 2 ] || fail "it did not go to worker 0 first"
[ "$(metric worker_failures_total "${url[W0]}")" -ge 1 ] || fail "no failure counted on worker 0"
[ "$(metric worker_requests_total "${url[W1]}")" = 2 ] || fail "worker 1 did not answer it"
[ "$(curl -s "$router/metrics" | awk '$1 == "deepinfer_router:retries_total" {print $2}')" -ge 1 ] ||
  fail "no retry counted"

# 2. Ejected by the health checks; then nothing more reaches it.
wait_metric worker_healthy "${url[W0]}" 0
before=$(metric worker_requests_total "${url[W0]}")
for n in 1 2 3 4; do [ "$(ask "after ejection $n")" = 200 ] || fail "request $n after ejection"; done
[ "$(metric worker_requests_total "${url[W0]}")" = "$before" ] || fail "a request went to the hung worker"
[ "$(metric worker_ejections_total "${url[W0]}")" -ge 1 ] || fail "no ejection counted"
grep -q "ejected worker ${url[W0]}: health check" "$tmp/router.log" || fail "no ejection logged"

# 3. Resumed: readmitted, and round robin reaches it again.
kill -CONT "${pid[W0]}"
wait_metric worker_healthy "${url[W0]}" 1
for n in 1 2; do [ "$(ask "after resume $n")" = 200 ] || fail "request $n after resume"; done
[ "$(metric worker_requests_total "${url[W0]}")" -gt "$before" ] || fail "readmitted worker unused"
echo "PASS router hang"

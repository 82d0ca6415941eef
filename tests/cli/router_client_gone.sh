#!/usr/bin/env bash
# deepinfer router when the client leaves before its answer (real workers, embedded tiny model,
# CPU, loopback). The worker that holds the request is stopped (SIGSTOP) so that the client
# certainly leaves while the router waits on it; then resumed.
#   1. PD (1 prefill + 1 decode): the client leaves during phase 1. The router counts it
#      (client_gone_total), closes the prefill worker's connection (the worker cancels the
#      request), retries nothing and sends no phase 2: after the next request (whose phase 1
#      the resumed worker takes after the abandoned one), the decode worker had that one only.
#   2. Data parallel (one worker), a non-streamed request: counted, nothing retried.
#   3. Both routers then answer as before.
# Whether a worker still computes an abandoned request depends on how soon it reads the closed
# connection (the server's own cancel, tested with the server); a prefill of the tiny model can
# finish first, so only the router's side is asserted here.
# Usage: router_client_gone.sh path/to/deepinfer
set -u
bin="$1"
source "$(dirname "$0")/servers_helpers.sh"
json='Content-Type: application/json'
wait_for() {  # DESCRIPTION COMMAND...: up to 20 s for COMMAND to succeed
  local what="$1"
  shift
  for _ in $(seq 1 200); do "$@" && return 0; sleep 0.1; done
  fail "$what"
}
equals() { [ "$($1 "${@:2:$#-2}")" = "${@: -1}" ]; }  # FUNC ARGS... VALUE
body='{"prompt": "a request nobody waits for", "max_tokens": 8, "temperature": 0}'
leave_while_stopped() {  # ROUTER WORKER SERIES_OF_THE_ROUTER_THAT_SHOWS_THE_CALL
  kill -STOP "${pid[$2]}"
  curl -s -o /dev/null --max-time 60 "$1/v1/completions" -H "$json" -d "$body" &
  local client=$!
  wait_for "the router never sent the request to $2" equals router_value "$1" "$3" 1
  kill "$client"
  wait "$client" 2>/dev/null
  wait_for "the router did not count the client that left" \
    equals router_value "$1" client_gone_total 1
  kill -CONT "${pid[$2]}"
}

start P --role prefill
start D --role decode
start W
for w in P D W; do wait_health "$w"; done

# 1. PD: the client leaves during phase 1.
# No health check while a worker is stopped: one would eject it.
start_router PD --prefill "${url[P]}" --decode "${url[D]}" --health-interval-s 1000
pd="${url[PD]}"
wait_for "PD router never healthy" curl -sf -o /dev/null "$pd/health"
leave_while_stopped "$pd" P "worker_requests_total{pool=\"prefill\",worker=\"${url[P]}\"}"
[ "$(router_value "$pd" retries_total)" = 0 ] || fail "the router retried a request nobody waits for"

# 2. Data parallel: a non-streamed request whose client leaves.
start_router DP --worker "${url[W]}" --health-interval-s 1000
dp="${url[DP]}"
wait_for "DP router never healthy" curl -sf -o /dev/null "$dp/health"
leave_while_stopped "$dp" W "worker_requests_total{worker=\"${url[W]}\"}"
[ "$(router_value "$dp" retries_total)" = 0 ] || fail "the router retried a request nobody waits for"

# 3. Both still answer.
for r in "$pd" "$dp"; do
  code=$(curl -s -o "$tmp/answer.json" -w '%{http_code}' --max-time 30 "$r/v1/completions" \
    -H "$json" -d '{"prompt": "still here", "max_tokens": 4, "temperature": 0}')
  [ "$code" = 200 ] || fail "$r after a client left: $code $(cat "$tmp/answer.json")"
done
# The resumed prefill worker took the abandoned request before this one, so a router that had
# waited for its phase 1 would have sent its phase 2 before this request's: one decode request.
[ "$(router_value "$pd" "worker_requests_total{pool=\"decode\",worker=\"${url[D]}\"}")" = 1 ] ||
  fail "a phase 2 reached the decode worker for the client that had left"
echo "PASS router client gone"

#!/usr/bin/env bash
# Worker self-registration with `deepinfer router --allow-register`, one real worker (embedded
# tiny model, CPU, loopback), registered by curl as `serve --register-with` does:
#   1. flags: PD/data-parallel mix-ups and wrong policies are refused, naming the flag;
#   2. a router with no workers answers 503 no_worker_available; bad bodies 400 naming the
#      field; without --allow-register the endpoint answers 403;
#   3. join: /metrics lists the worker and requests reach it; leave: it is gone (503 again);
#   4. a registration whose heartbeats stop expires after its ttl_s;
#   5. PD (--pd --allow-register): a `both` worker joins both sides, and a request is sent to
#      it plain (one worker on both sides), counted as pd_plain_total{reason="same_worker"}.
# Usage: router_register.sh path/to/deepinfer
set -u
bin="$1"
source "$(dirname "$0")/servers_helpers.sh"
value() { router_value "$@"; }  # ROUTER SERIES
wait_value() {  # ROUTER SERIES VALUE: up to 20 s
  for _ in $(seq 1 200); do [ "$(value "$1" "$2")" = "$3" ] && return 0; sleep 0.1; done
  fail "$2 never became $3 (is '$(value "$1" "$2")')"
}
post() {  # URL BODY -> HTTP code; the answer in $tmp/post.json
  curl -s -o "$tmp/post.json" -w '%{http_code}' --max-time 30 "$1" -H 'Content-Type: application/json' -d "$2"
}
ask() { post "$1/v1/completions" '{"prompt": "Registered", "max_tokens": 3, "temperature": 0}'; }
refused() {  # EXPECTED_TEXT ARGS...
  local want="$1"
  shift
  out=$("$bin" router "$@" 2>&1) && fail "accepted: router $*"
  echo "$out" | grep -qF -- "$want" || fail "router $*: message '$out' lacks '$want'"
}

# 1. Flags.
refused "no workers" --port 0
refused "--worker is data-parallel mode" --worker http://127.0.0.1:1 --prefill http://127.0.0.1:2
refused "--decode: PD mode needs" --prefill http://127.0.0.1:1
refused "--prefill: PD mode needs" --decode http://127.0.0.1:1
refused "--decode-policy 'cache_aware'" --prefill http://127.0.0.1:1 --decode http://127.0.0.1:2 \
  --decode-policy cache_aware
refused "--prefill-policy 'fastest'" --prefill http://127.0.0.1:1 --decode http://127.0.0.1:2 \
  --prefill-policy fastest
refused "--policy is data-parallel" --prefill http://127.0.0.1:1 --decode http://127.0.0.1:2 \
  --policy random
refused "--decode-policy applies to PD" --worker http://127.0.0.1:1 --decode-policy random
refused "--prefill: worker URL 'x:1'" --prefill x:1 --decode http://127.0.0.1:2
"$bin" router --help | grep -q -- "--allow-register" || fail "--help lacks --allow-register"

start worker
w="${url[worker]}"
wait_health worker
checks=(--health-interval-s 0.3 --health-timeout-s 3)

# 2. No workers yet; bad bodies; registration off.
start_router dp "${checks[@]}" --allow-register
dp="${url[dp]}"
[ "$(ask "$dp")" = 503 ] || fail "no workers: $(cat "$tmp/post.json")"
grep -q no_worker_available "$tmp/post.json" || fail "503 code: $(cat "$tmp/post.json")"
[ "$(post "$dp/router/workers" '{"role": "both"}')" = 400 ] || fail "no url accepted"
grep -q "'url'" "$tmp/post.json" || fail "400 without 'url': $(cat "$tmp/post.json")"
[ "$(post "$dp/router/workers" "{\"url\": \"$w\", \"role\": \"middle\"}")" = 400 ] || fail "bad role"
grep -q "'role' 'middle'" "$tmp/post.json" || fail "400 without 'role': $(cat "$tmp/post.json")"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$dp/router/workers")" = 405 ] || fail "GET not 405"
start_router closed "${checks[@]}" --worker "$w"
[ "$(post "${url[closed]}/router/workers" "{\"url\": \"$w\", \"role\": \"both\", \"ttl_s\": 6}")" = 403 ] ||
  fail "registration open without --allow-register"
grep -q -- "--allow-register" "$tmp/post.json" || fail "403 without the flag: $(cat "$tmp/post.json")"

# 3. Join, serve, leave.
[ "$(post "$dp/router/workers" "{\"url\": \"$w\", \"role\": \"both\", \"ttl_s\": 60}")" = 200 ] ||
  fail "join: $(cat "$tmp/post.json")"
[ "$(cat "$tmp/post.json")" = "{}" ] || fail "join answer: $(cat "$tmp/post.json")"
[ "$(value "$dp" "worker_registered{worker=\"$w\"}")" = 1 ] || fail "not listed after join"
[ "$(value "$dp" 'workers_joined_total{pool="worker"}')" = 1 ] || fail "join not counted"
[ "$(ask "$dp")" = 200 ] || fail "request after join: $(cat "$tmp/post.json")"
[ "$(value "$dp" "worker_requests_total{worker=\"$w\"}")" = 1 ] || fail "it did not reach the worker"
[ "$(post "$dp/router/workers/leave" "{\"url\": \"$w\"}")" = 200 ] || fail "leave"
[ "$(value "$dp" "worker_registered{worker=\"$w\"}")" = 0 ] || fail "listed after leave"
[ "$(value "$dp" 'workers_left_total{pool="worker"}')" = 1 ] || fail "leave not counted"
[ "$(ask "$dp")" = 503 ] || fail "a request after leave: $(cat "$tmp/post.json")"

# 4. Registered again with ttl_s 1 and no heartbeat: expires.
[ "$(post "$dp/router/workers" "{\"url\": \"$w\", \"role\": \"both\", \"ttl_s\": 1}")" = 200 ] ||
  fail "re-join"
[ "$(value "$dp" 'workers_joined_total{pool="worker"}')" = 2 ] || fail "re-join not counted"
[ "$(ask "$dp")" = 200 ] || fail "request after re-join"
wait_value "$dp" 'workers_expired_total{pool="worker"}' 1
[ "$(value "$dp" "worker_registered{worker=\"$w\"}")" = 0 ] || fail "listed after expiry"
[ "$(ask "$dp")" = 503 ] || fail "a request after expiry: $(cat "$tmp/post.json")"
grep -q "worker $w expired" "$tmp/dp.log" || fail "expiry not logged"

# 5. PD: a `both` worker registers onto both sides; a pair of one worker goes plain.
start_router pd "${checks[@]}" --pd --allow-register
pd="${url[pd]}"
[ "$(post "$pd/router/workers" "{\"url\": \"$w\", \"role\": \"both\", \"ttl_s\": 60}")" = 200 ] ||
  fail "PD join"
for side in prefill decode; do
  [ "$(value "$pd" "worker_registered{pool=\"$side\",worker=\"$w\"}")" = 1 ] || fail "not on $side"
done
[ "$(ask "$pd")" = 200 ] || fail "PD request: $(cat "$tmp/post.json")"
[ "$(value "$pd" 'pd_plain_total{reason="same_worker"}')" = 1 ] || fail "not counted same_worker"
[ "$(value "$pd" 'pd_pairs_total')" = 0 ] || fail "a transfer pair for one worker"
[ "$(post "$pd/router/workers/leave" "{\"url\": \"$w\"}")" = 200 ] || fail "PD leave"
for side in prefill decode; do
  [ "$(value "$pd" "worker_registered{pool=\"$side\",worker=\"$w\"}")" = 0 ] || fail "still on $side"
done
echo "PASS router register"

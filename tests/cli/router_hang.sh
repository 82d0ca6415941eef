#!/usr/bin/env bash
# deepinfer router over two real workers (embedded tiny model, CPU, loopback) when one hangs:
#   1. worker 0 is stopped (SIGSTOP): a request the policy had sent to it times out there
#      (--worker-timeout-s) and is answered by worker 1, not lost;
#   2. the health checks eject worker 0 (/metrics), and requests after that all go to worker 1;
#   3. resumed (SIGCONT), it passes its checks and is readmitted.
# Usage: router_hang.sh path/to/deepinfer
set -u
bin="$1"
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/*.log; do echo "--- $f"; tail -15 "$f"; done
  exit 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_health() {  # URL PID
  for _ in $(seq 1 240); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1/health")" = 200 ] && return 0
    kill -0 "$2" 2>/dev/null || fail "$1 exited"
    sleep 0.25
  done
  fail "$1/health never became 200"
}
metric() {  # NAME WORKER_URL
  curl -s "$router/metrics" | awk -v k="deepinfer_router:$1{worker=\"$2\"}" '$1 == k {print $2}'
}
wait_metric() {  # NAME WORKER_URL VALUE: up to 20 s
  for _ in $(seq 1 200); do [ "$(metric "$1" "$2")" = "$3" ] && return 0; sleep 0.1; done
  fail "$1 of $2 never became $3 (is $(metric "$1" "$2"))"
}
json='Content-Type: application/json'
declare -a wpid wurl
for i in 0 1; do
  port=$(free_port)
  wurl[$i]="http://127.0.0.1:$port"
  "$bin" serve --host 127.0.0.1 --port "$port" >"$tmp/worker$i.log" 2>&1 &
  wpid[$i]=$!
  pids+=("$!")
done
# The router starts once the workers are loaded, so no check ejects a loading one.
for i in 0 1; do wait_health "${wurl[$i]}" "${wpid[$i]}"; done
rport=$(free_port)
router="http://127.0.0.1:$rport"
"$bin" router --port "$rport" --worker "${wurl[0]}" "${wurl[1]}" --policy round_robin \
  --health-interval-s 0.3 --health-timeout-s 2 --worker-timeout-s 4 >"$tmp/router.log" 2>&1 &
rpid=$!
pids+=("$rpid")
wait_health "$router" "$rpid"
for i in 0 1; do wait_metric worker_healthy "${wurl[$i]}" 1; done
ask() {  # PROMPT -> HTTP code; the answer in $tmp/answer.json
  curl -s -o "$tmp/answer.json" -w '%{http_code}' --max-time 30 "$router/v1/completions" -H "$json" \
    -d "{\"prompt\": \"$1\", \"max_tokens\": 4, \"temperature\": 0}"
}
# Round robin: two requests leave its cursor on worker 0.
for n in 1 2; do [ "$(ask "warm $n")" = 200 ] || fail "warm-up $n"; done
[ "$(metric worker_requests_total "${wurl[0]}")" = 1 ] || fail "worker 0 should have had 1 request"

# 1. Worker 0 hangs; the next request goes to it, times out, and is answered by worker 1.
kill -STOP "${wpid[0]}"
code=$(ask "while hung")
[ "$code" = 200 ] || fail "request to the hung worker: $code $(cat "$tmp/answer.json")"
python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); assert a["choices"][0]["text"] is not None' \
  "$tmp/answer.json" || fail "not an answer: $(cat "$tmp/answer.json")"
[ "$(metric worker_requests_total "${wurl[0]}")" = 2 ] || fail "it did not go to worker 0 first"
[ "$(metric worker_failures_total "${wurl[0]}")" -ge 1 ] || fail "no failure counted on worker 0"
[ "$(metric worker_requests_total "${wurl[1]}")" = 2 ] || fail "worker 1 did not answer it"
[ "$(curl -s "$router/metrics" | awk '$1 == "deepinfer_router:retries_total" {print $2}')" -ge 1 ] ||
  fail "no retry counted"

# 2. Ejected by the health checks; then nothing more reaches it.
wait_metric worker_healthy "${wurl[0]}" 0
before=$(metric worker_requests_total "${wurl[0]}")
for n in 1 2 3 4; do [ "$(ask "after ejection $n")" = 200 ] || fail "request $n after ejection"; done
[ "$(metric worker_requests_total "${wurl[0]}")" = "$before" ] || fail "a request went to the hung worker"
[ "$(metric worker_ejections_total "${wurl[0]}")" -ge 1 ] || fail "no ejection counted"
grep -q "ejected worker ${wurl[0]}: health check" "$tmp/router.log" || fail "no ejection logged"

# 3. Resumed: readmitted, and round robin reaches it again.
kill -CONT "${wpid[0]}"
wait_metric worker_healthy "${wurl[0]}" 1
for n in 1 2; do [ "$(ask "after resume $n")" = 200 ] || fail "request $n after resume"; done
[ "$(metric worker_requests_total "${wurl[0]}")" -gt "$before" ] || fail "readmitted worker unused"
echo "PASS router hang"

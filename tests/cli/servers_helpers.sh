# Sourced by the CLI tests that run several `deepinfer serve` (and `deepinfer router`) processes
# on loopback. Needs $bin (the deepinfer binary) set first. Gives: $tmp (removed at exit, with
# every server killed), fail MSG (prints each server's log tail, exits 1), free_port,
# start NAME [serve flags...] (sets url[NAME] and pid[NAME], log in $tmp/NAME.log),
# restart NAME [serve flags...] (the same on NAME's port, once its process is gone),
# start_router NAME [router flags...] (the same for a router; returns once it answers),
# wait_health NAME, router_value URL SERIES (a router's /metrics value).
tmp=$(mktemp -d)
pids=()
declare -A url pid
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/*.log; do echo "--- $f"; tail -8 "$f"; done
  exit 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
spawn() {  # NAME PORT ARGS...: "$bin" ARGS in the background, serving on loopback at PORT
  local name="$1" port="$2"
  shift 2
  url[$name]="http://127.0.0.1:$port"
  "$bin" "$@" >"$tmp/$name.log" 2>&1 &
  pid[$name]=$!
  pids+=("$!")
}
serve_at() {  # NAME PORT ARGS...
  local name="$1" port="$2"
  shift 2
  spawn "$name" "$port" serve --host 127.0.0.1 --port "$port" --access-log '' "$@"
}
start() { serve_at "$1" "$(free_port)" "${@:2}"; }  # NAME ARGS...
restart() { serve_at "$1" "${url[$1]##*:}" "${@:2}"; }  # NAME ARGS...
start_router() {  # NAME ARGS...
  local name="$1" port
  shift
  port=$(free_port)
  spawn "$name" "$port" router --port "$port" "$@"
  # /metrics, not /health: a router with no healthy worker yet is up but not healthy.
  for _ in $(seq 1 100); do
    curl -s -o /dev/null --max-time 2 "${url[$name]}/metrics" && return 0
    kill -0 "${pid[$name]}" 2>/dev/null || fail "router $name exited"
    sleep 0.05
  done
  fail "router $name did not start"
}
wait_health() {  # NAME
  for _ in $(seq 1 240); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "${url[$1]}/health")" = 200 ] && return 0
    kill -0 "${pid[$1]}" 2>/dev/null || fail "$1 exited"
    sleep 0.25
  done
  fail "$1 never became healthy"
}
router_value() {  # URL SERIES (name with labels, exactly as /metrics prints it)
  curl -s "$1/metrics" | awk -v k="deepinfer_router:$2" '$1 == k {print $2}'
}
tokens() {  # URL PATH BODY: the answer's token strings (from logprobs), one line
  curl -s --max-time 60 -H 'Content-Type: application/json' -d "$3" "$1$2" | python3 -c '
import json, sys
j = json.load(sys.stdin)
c = j["choices"][0]
lp = c["logprobs"]
print(json.dumps([t["token"] for t in lp["content"]] if "content" in lp else lp["tokens"]))'
}

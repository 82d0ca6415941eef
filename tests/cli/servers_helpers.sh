# Sourced by the CLI tests that run several `deepinfer serve` processes on loopback. Needs $bin
# (the deepinfer binary) set first. Gives: $tmp (removed at exit, with every server killed),
# fail MSG (prints each server's log tail, exits 1), free_port, start NAME [serve flags...]
# (sets url[NAME] and pid[NAME], log in $tmp/NAME.log), wait_health NAME.
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
start() {  # NAME ARGS...
  local name="$1" port
  shift
  port=$(free_port)
  url[$name]="http://127.0.0.1:$port"
  "$bin" serve --host 127.0.0.1 --port "$port" --access-log '' "$@" >"$tmp/$name.log" 2>&1 &
  pid[$name]=$!
  pids+=("$!")
}
wait_health() {  # NAME
  for _ in $(seq 1 240); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "${url[$1]}/health")" = 200 ] && return 0
    kill -0 "${pid[$1]}" 2>/dev/null || fail "$1 exited"
    sleep 0.25
  done
  fail "$1 never became healthy"
}

# Sourced by the serve smoke tests: start_server BIN ARGS... runs `BIN serve ARGS...` on a free
# loopback port with its log in $tmp/server.log, sets pid and base, and waits until /health is
# 200 (calling the script's fail() if the server exits or never gets ready).
start_server() {
  local bin="$1"
  shift
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$bin" serve --host 127.0.0.1 --port "$port" "$@" >"$tmp/server.log" 2>&1 &
  pid=$!
  base="http://127.0.0.1:$port"
  local code
  for _ in $(seq 1 240); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$base/health" || true)
    [ "$code" = 200 ] && return 0
    kill -0 "$pid" 2>/dev/null || fail "server exited"
    sleep 0.5
  done
  fail "/health never became 200"
}

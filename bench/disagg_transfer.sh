#!/usr/bin/env bash
# Prefill/decode disaggregation on one machine, no router: a plain server (role both), a prefill
# worker and a decode worker (CPU, the embedded tiny model unless MODEL is given, prefix cache
# off so every prompt is computed). For prompts of about 2k, 11k and 23k tokens (max_tokens 1):
# the plain request's time, the prefill phase's, and the decode phase's (fetch over loopback TCP
# with per-chunk SHA-256, write into the pool, first token out), whose answers must be equal;
# then the state bytes moved and the transfer rate from the decode worker's /metrics.
# Usage: bench/disagg_transfer.sh [path/to/deepinfer] [MODEL_DIR]
# SERVE_FLAGS (environment) go to every server, e.g. "--device cuda --max-model-len 16384" with
# GPU_FRACTIONS="0.3 0.6 0.9" (below) for three workers on one GPU; PROMPT_WORDS (default "1000 5500 11500")
# sets the prompts' sizes; TRANSFER_LABEL names the transfer path in the report.
set -eu
bin="${1:-build/deepinfer}"
model="${2:-}"
tmp=$(mktemp -d)
pids=()
# LOG_DIR (environment): where the servers' logs are kept (else they go with the temp dir).
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null
      [ -n "${LOG_DIR:-}" ] && cp "$tmp"/*.log "$LOG_DIR"/ 2>/dev/null; rm -rf "$tmp"' EXIT
declare -A url
roles=(both prefill decode)
# GPU_FRACTIONS (environment), e.g. "0.3 0.6 0.9": the servers share one GPU, so they start one
# after another, each with its --gpu-memory-utilization (a fraction of the whole device, other
# processes' memory included, so each takes the next step up). Without it they start at once.
read -r -a fractions <<<"${GPU_FRACTIONS:-}"
wait_healthy() {  # $1: index into roles
  local role=${roles[$1]}
  for _ in $(seq 1 2400); do  # a GPU model takes a while to load
    [ "$(curl -s -o /dev/null -w '%{http_code}' "${url[$role]}/health")" = 200 ] && break
    if ! kill -0 "${pids[$1]}" 2>/dev/null; then  # died while loading: say why, don't wait on
      echo "disagg_transfer.sh: the $role server exited:" >&2
      tail -20 "$tmp/$role.log" >&2
      exit 1
    fi
    sleep 0.25
  done
}
for i in 0 1 2; do
  role=${roles[$i]}
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  url[$role]="http://127.0.0.1:$port"
  extra=()
  [ -n "${fractions[$i]:-}" ] && extra=(--gpu-memory-utilization "${fractions[$i]}")
  # shellcheck disable=SC2086
  "$bin" serve $model --host 127.0.0.1 --port "$port" --role "$role" --access-log '' \
    --no-prefix-cache ${SERVE_FLAGS:-} "${extra[@]}" >"$tmp/$role.log" 2>&1 &
  pids+=("$!")
  [ ${#fractions[@]} -gt 0 ] && wait_healthy "$i"
done
for i in 0 1 2; do wait_healthy "$i"; done
python3 - "${url[both]}" "${url[prefill]}" "${url[decode]}" "${PROMPT_WORDS:-1000 5500 11500}" \
  "${TRANSFER_LABEL:-loopback TCP, SHA-256 per 4 MiB chunk on both ends}" <<'PY'
import json, sys, time, urllib.request
both, prefill, decode, words, label = sys.argv[1:]
def post(url, body, headers={}):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", **headers})
    t = time.perf_counter()
    out = json.loads(urllib.request.urlopen(req).read())
    return (time.perf_counter() - t) * 1000, out
print("| prompt tokens | plain (ms) | prefill phase (ms) | decode phase (ms) | PD - plain (ms) |")
print("|---:|---:|---:|---:|---:|")
for n in map(int, words.split()):
    body = {"prompt": " ".join(f"w{i}" for i in range(n)), "max_tokens": 1, "temperature": 0}
    t_plain, ref = post(both + "/v1/completions", body)
    t_pre, h = post(prefill + "/v1/completions", body, {"X-Deepinfer-Disagg": "prefill"})
    t_dec, got = post(decode + "/v1/completions", body,
                      {"X-Deepinfer-Disagg": "decode", "X-Deepinfer-Handoff": h["handoff"]})
    assert got["choices"] == ref["choices"], "the disaggregated answer differs"
    print(f"| {ref['usage']['prompt_tokens']} | {t_plain:.1f} | {t_pre:.1f} | {t_dec:.1f} | "
          f"{t_pre + t_dec - t_plain:+.1f} |")
metrics = urllib.request.urlopen(decode + "/metrics").read().decode()
val = {l.split("{")[0]: float(l.split()[-1]) for l in metrics.splitlines()
       if l.startswith("deepinfer:disagg_")}
b, s = val["deepinfer:disagg_fetched_bytes_total"], val["deepinfer:disagg_fetch_seconds_total"]
print(f"\nstate fetched: {b / 1e6:.2f} MB in {s * 1000:.1f} ms of fetches: {b / s / 1e9:.2f} GB/s "
      f"({label})")
PY

#!/usr/bin/env bash
# Prefill routing policies compared on a shared-prefix workload (bench serve's shared-prefix
# dataset: P long system prompts, each request one of them plus its own text), in one run. For
# each of cache_aware, round_robin and random: four fresh CPU workers (embedded tiny model,
# loopback; cold prefix caches), the router, one bench serve run. `pd`: 2 prefill + 2 decode
# workers, the policy is --prefill-policy (decode: power_of_two); `dp`: 4 plain workers, the
# policy is --policy. Reports the prefix hit rate (usage cached tokens / prompt tokens), TTFT,
# throughput, and the spread of requests over the workers that decode (the router's
# outstanding requests per decode worker, sampled every 0.2 s, and /load's num_running when
# the workers serve it). Not a test. Usage:
#   bench/router_policies.sh [path/to/deepinfer] [pd|dp] [num_prompts] [concurrency]
#                            [num_prefixes] [prefix_len] [suffix_len] [out_len]
set -eu
bin="${1:-build/deepinfer}"
mode="${2:-pd}"
n="${3:-400}"
c="${4:-32}"
np="${5:-8}"
plen="${6:-512}"
slen="${7:-64}"
olen="${8:-16}"
tmp=$(mktemp -d)
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; pids=(); }
trap 'stop_all; rm -rf "$tmp"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_health() { for _ in $(seq 1 240); do curl -sf -o /dev/null "$1/health" && return; sleep 0.25; done; echo "no $1"; exit 1; }
echo "mode $mode: $n requests, concurrency $c, $np prefixes of $plen tokens + $slen own tokens, $olen output tokens"
for policy in cache_aware round_robin random; do
  urls=()
  for i in 0 1 2 3; do
    p=$(free_port)
    role=()
    if [ "$mode" = pd ]; then role=(--role "$([ $i -lt 2 ] && echo prefill || echo decode)"); fi
    "$bin" serve --host 127.0.0.1 --port "$p" "${role[@]}" >"$tmp/worker$i.log" 2>&1 &
    pids+=($!)
    urls+=("http://127.0.0.1:$p")
  done
  for u in "${urls[@]}"; do wait_health "$u"; done
  rp=$(free_port)
  router="http://127.0.0.1:$rp"
  if [ "$mode" = pd ]; then
    layout=(--prefill "${urls[0]}" "${urls[1]}" --decode "${urls[2]}" "${urls[3]}" --prefill-policy "$policy")
  else
    layout=(--worker "${urls[@]}" --policy "$policy")
  fi
  "$bin" router --port "$rp" "${layout[@]}" --seed 1 --health-interval-s 0.5 >"$tmp/router.log" 2>&1 &
  pids+=($!)
  wait_health "$router"
  : >"$tmp/samples-$policy.txt"
  (while :; do curl -s "$router/metrics" | grep -E '^deepinfer_router:worker_(outstanding_requests|num_running)' \
     >>"$tmp/samples-$policy.txt" || true; echo "--" >>"$tmp/samples-$policy.txt"; sleep 0.2; done) &
  sampler=$!
  "$bin" bench serve --base-url "$router" --dataset-name shared-prefix --num-prefixes "$np" \
    --prefix-len "$plen" --random-input-len "$slen" --random-output-len "$olen" --num-prompts "$n" \
    --max-concurrency "$c" --request-rate inf --num-warmups 0 --seed 7 --disable-tqdm \
    --output-json "$tmp/$policy.json" >"$tmp/bench.out" 2>&1 || { cat "$tmp/bench.out"; exit 1; }
  kill "$sampler"; wait "$sampler" 2>/dev/null || true
  curl -s "$router/metrics" >"$tmp/metrics-$policy.txt"
  stop_all
done
python3 - "$tmp" "$mode" <<'PY'
import json, re, sys, statistics
t, mode = sys.argv[1], sys.argv[2]
decode_pool = 'pool="decode",' if mode == "pd" else ""
print("| policy | prefix hit rate | TTFT p50 / p99 (ms) | req/s | output tok/s | decode spread: requests per decode worker | outstanding per decode worker, mean (max) | failed |")
print("|---|---|---|---|---|---|---|---|")
for policy in ("cache_aware", "round_robin", "random"):
    r = json.load(open(f"{t}/{policy}.json"))
    m = open(f"{t}/metrics-{policy}.txt").read()
    def per_worker(name):
        return {w: float(v) for w, v in re.findall(
            r"^deepinfer_router:" + name + r"\{" + decode_pool + r'worker="([^"]+)"\} (\S+)$', m, re.M)}
    reqs = per_worker("worker_requests_total")
    samples = {}
    for block in open(f"{t}/samples-{policy}.txt").read().split("--\n"):
        for w, v in re.findall(r"^deepinfer_router:worker_outstanding_requests\{" + decode_pool +
                               r'worker="([^"]+)"\} (\S+)$', block, re.M):
            samples.setdefault(w, []).append(float(v))
    busy = [s for s in zip(*samples.values()) if sum(s) > 0]  # while requests ran
    spread = ", ".join("%.1f (%.0f)" % (statistics.mean(col), max(col)) for col in zip(*busy)) if busy else "-"
    hit = r["cached_prompt_tokens"] / max(1, r["total_input_tokens"])
    print("| %s | %.1f%% (%d / %d) | %.0f / %.0f | %.2f | %.0f | %s | %s | %d |" % (
        policy, 100 * hit, r["cached_prompt_tokens"], r["total_input_tokens"], r["ttft_ms"]["p50"],
        r["ttft_ms"]["p99"], r["request_throughput"], r["output_throughput"],
        " / ".join("%.0f" % v for v in reqs.values()), spread, r["failed"]))
PY

// deepinfer router: the load balancer over `deepinfer serve` replicas (src/deepinfer/router).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/cli/fd_limit.h"
#include "deepinfer/router/router_server.h"

namespace {

int run_router_command(int argc, char** argv) {
  using namespace deepinfer::router;
  RouterOptions o;
  std::vector<std::string> workers, prefill, decode;
  std::string policy = "cache_aware", prefill_policy = "cache_aware",
              decode_policy = "power_of_two";
  CLI::App app{
      "Balance OpenAI-compatible requests over `deepinfer serve` workers: /v1/chat/completions, "
      "/v1/completions and /v1/models go to a worker, answers and SSE streams pass through "
      "unchanged; /health and /metrics are the router's own. Data-parallel (--worker): each "
      "request goes whole to one worker. Prefill/decode (--prefill and --decode, or --pd): each "
      "request is prefilled on a prefill worker and decoded on a decode worker, which fetches "
      "the state from it. Workers failing GET /health are ejected and readmitted when they "
      "pass; with --allow-register, workers also join by POST /router/workers and leave by POST "
      "/router/workers/leave (or when their heartbeats stop). SIGTERM/SIGINT: stop accepting, "
      "let requests in flight finish for --shutdown-grace seconds, exit 0.",
      "deepinfer router"};
  app.add_option("--host", o.host, "IP address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "TCP port (0: any free port)")->capture_default_str();
  app.add_option("--worker", workers,
                 "data-parallel: a worker, http://host:port (several after one flag, or repeat)")
      ->take_all();
  app.add_option("--prefill", prefill,
                 "PD: prefill worker URL(s) (`serve --role prefill` or both); implies --pd")
      ->take_all();
  app.add_option("--decode", decode,
                 "PD: decode worker URL(s) (`serve --role decode` or both); implies --pd")
      ->take_all();
  app.add_flag("--pd", o.pd,
               "prefill/decode mode even with no --prefill/--decode (workers register)");
  app.add_flag("--allow-register", o.allow_register,
               "accept POST /router/workers {url, role, ttl_s} and /router/workers/leave {url}; "
               "without it they answer 403");
  app.add_option("--policy", policy,
                 "data-parallel: cache_aware, round_robin, random or power_of_two")
      ->capture_default_str();
  app.add_option("--prefill-policy", prefill_policy,
                 "PD prefill side: cache_aware (balanced against pending prefill tokens), "
                 "round_robin or random")
      ->capture_default_str();
  app.add_option("--decode-policy", decode_policy,
                 "PD decode side: power_of_two (KV usage and running sequences), round_robin or "
                 "random")
      ->capture_default_str();
  app.add_option(
         "--seed", o.seed,
         "seed of the random and power_of_two policies (PD's decode side draws with seed + 1)")
      ->capture_default_str();
  app.add_option("--health-interval-s", o.health_interval_s,
                 "seconds between health checks (GET /health, then GET /load)")
      ->capture_default_str();
  app.add_option("--health-timeout-s", o.health_timeout_s,
                 "seconds a health check may wait (each of connect, send, answer)")
      ->capture_default_str();
  app.add_option("--connect-timeout-s", o.connect_timeout_s, "seconds to connect to a worker")
      ->capture_default_str();
  app.add_option("--worker-timeout-s", o.worker_timeout_s,
                 "longest silence of a worker within a request (before its first byte too)")
      ->capture_default_str();
  app.add_option("--read-timeout-s", o.read_timeout_s,
                 "seconds for a client's request to arrive (and keep-alive idle time)")
      ->capture_default_str();
  app.add_option("--shutdown-grace", o.shutdown_grace_s,
                 "seconds requests in flight get to finish after SIGTERM/SIGINT")
      ->capture_default_str();
  app.add_option("--max-body-bytes", o.max_body_bytes, "larger request bodies get 413")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto urls = [](const char* flag, const std::vector<std::string>& in,
                 std::vector<WorkerUrl>& out) -> std::string {
    for (const auto& w : in) {
      auto url = parse_worker_url(w);
      if (!url.ok()) return std::string(flag) + ": " + url.status().message();
      out.push_back(*url);
    }
    return "";
  };
  for (auto [flag, in, out] : {std::tuple{"--worker", &workers, &o.workers},
                               {"--prefill", &prefill, &o.prefill},
                               {"--decode", &decode, &o.decode}})
    if (auto err = urls(flag, *in, *out); !err.empty())
      return deepinfer::cli::command_failed("router", err);
  o.pd = o.pd || !o.prefill.empty() || !o.decode.empty();
  if (o.pd && !o.workers.empty())
    return deepinfer::cli::command_failed(
        "router",
        "--worker is data-parallel mode; with --prefill/--decode/--pd list workers "
        "under --prefill and --decode (a `both` worker may be under both)");
  if (!o.pd && o.workers.empty() && !o.allow_register)
    return deepinfer::cli::command_failed(
        "router",
        "no workers: give --worker URL... (data-parallel), --prefill URL... --decode "
        "URL... (PD), or --allow-register for workers that register themselves");
  if (o.pd && !o.allow_register && (o.prefill.empty() || o.decode.empty()))
    return deepinfer::cli::command_failed(
        "router", std::string(o.prefill.empty() ? "--prefill" : "--decode") +
                      ": PD mode needs at least one worker on each side (or --allow-register)");
  if (o.pd && app.count("--policy"))
    return deepinfer::cli::command_failed(
        "router",
        "--policy is data-parallel mode's; in PD mode use --prefill-policy and "
        "--decode-policy");
  if (!o.pd && (app.count("--prefill-policy") || app.count("--decode-policy")))
    return deepinfer::cli::command_failed(
        "router",
        std::string(app.count("--prefill-policy") ? "--prefill-policy" : "--decode-policy") +
            " applies to PD mode (--prefill/--decode or --pd)");
  auto kind = parse_policy(policy, "--policy");
  if (!kind.ok()) return deepinfer::cli::command_failed("router", kind.status().message());
  o.policy = *kind;
  auto pkind = parse_policy(prefill_policy, "--prefill-policy");
  if (!pkind.ok()) return deepinfer::cli::command_failed("router", pkind.status().message());
  if (*pkind == PolicyKind::kPowerOfTwo)
    return deepinfer::cli::command_failed(
        "router",
        "--prefill-policy 'power_of_two': the prefill side is cache_aware, round_robin or "
        "random");
  o.prefill_policy = *pkind;
  auto dkind = parse_policy(decode_policy, "--decode-policy");
  if (!dkind.ok()) return deepinfer::cli::command_failed("router", dkind.status().message());
  if (*dkind == PolicyKind::kCacheAware)
    return deepinfer::cli::command_failed(
        "router",
        "--decode-policy 'cache_aware': the decode side is power_of_two, round_robin or "
        "random (prefixes matter where the prompt is computed)");
  o.decode_policy = *dkind;
  if (o.port < 0 || o.port > 65535)
    return deepinfer::cli::command_failed("router",
                                          "--port " + std::to_string(o.port) + ": 0-65535");
  auto positive = [](double v) { return v > 0; };
  for (auto [flag, value] : {std::pair{"--health-interval-s", o.health_interval_s},
                             {"--health-timeout-s", o.health_timeout_s},
                             {"--connect-timeout-s", o.connect_timeout_s},
                             {"--worker-timeout-s", o.worker_timeout_s},
                             {"--read-timeout-s", o.read_timeout_s}}) {
    if (!positive(value))
      return deepinfer::cli::command_failed(
          "router", std::string(flag) + " " + std::to_string(value) + ": must be > 0");
  }
  if (!(o.shutdown_grace_s >= 0))
    return deepinfer::cli::command_failed("router", "--shutdown-grace: must be >= 0");
  deepinfer::cli::raise_fd_limit();
  auto st = run_router(o);
  if (!st.ok()) return deepinfer::cli::command_failed("router", st.message());
  return 0;
}

}  // namespace

DEEPINFER_REGISTER_COMMAND(kRouter, "router",
                           "load balancer over `deepinfer serve` workers (OpenAI-compatible)",
                           run_router_command);

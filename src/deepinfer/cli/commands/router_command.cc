// deepinfer router: the load balancer over `deepinfer serve` replicas (src/deepinfer/router).
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/router/router_server.h"

namespace {

int fail(const std::string& msg) {
  std::fprintf(stderr, "deepinfer router: %s\n", msg.c_str());
  return 1;
}

// Each client request holds two descriptors (client and worker).
void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int run_router_command(int argc, char** argv) {
  using namespace deepinfer::router;
  RouterOptions o;
  std::vector<std::string> workers;
  std::string policy = "cache_aware";
  CLI::App app{
      "Balance OpenAI-compatible requests over `deepinfer serve` workers (data-parallel "
      "replicas): /v1/chat/completions, /v1/completions and /v1/models go to a worker, answers "
      "and SSE streams pass through unchanged; /health and /metrics are the router's own. "
      "Workers failing GET /health are ejected and readmitted when they pass. SIGTERM/SIGINT: "
      "stop accepting, let requests in flight finish for --shutdown-grace seconds, exit 0.",
      "deepinfer router"};
  app.add_option("--host", o.host, "IP address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "TCP port (0: any free port)")->capture_default_str();
  app.add_option("--worker", workers, "a worker, http://host:port (repeat for each)")
      ->required()
      ->take_all();
  app.add_option("--policy", policy, "cache_aware, round_robin or random")->capture_default_str();
  app.add_option("--seed", o.seed, "random policy's seed")->capture_default_str();
  app.add_option("--health-interval-s", o.health_interval_s, "seconds between health checks")
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
  for (const auto& w : workers) {
    auto url = parse_worker_url(w);
    if (!url.ok()) return fail("--worker: " + url.status().message());
    o.workers.push_back(*url);
  }
  auto kind = parse_policy(policy);
  if (!kind.ok()) return fail(kind.status().message());
  o.policy = *kind;
  if (o.port < 0 || o.port > 65535) return fail("--port " + std::to_string(o.port) + ": 0-65535");
  auto positive = [](double v) { return v > 0; };
  for (auto [flag, value] : {std::pair{"--health-interval-s", o.health_interval_s},
                             {"--health-timeout-s", o.health_timeout_s},
                             {"--connect-timeout-s", o.connect_timeout_s},
                             {"--worker-timeout-s", o.worker_timeout_s},
                             {"--read-timeout-s", o.read_timeout_s}}) {
    if (!positive(value))
      return fail(std::string(flag) + " " + std::to_string(value) + ": must be > 0");
  }
  if (!(o.shutdown_grace_s >= 0)) return fail("--shutdown-grace: must be >= 0");
  raise_fd_limit();
  auto st = run_router(o);
  if (!st.ok()) return fail(st.message());
  return 0;
}

}  // namespace

DEEPINFER_REGISTER_COMMAND(kRouter, "router",
                           "load balancer over `deepinfer serve` workers (OpenAI-compatible)",
                           run_router_command);

// `deepinfer router`: an OpenAI-compatible front over `deepinfer serve` workers. One io thread
// runs every connection, proxy and health check as a coroutine, so the router's state is never
// shared across threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/router/policy.h"
#include "deepinfer/router/registration.h"
#include "deepinfer/router/router_metrics.h"
#include "deepinfer/router/worker_pool.h"
#include "deepinfer/router/worker_url.h"

namespace deepinfer::router {

struct RouterOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  // Data-parallel: `workers`, each serving whole requests. PD (`pd`): `prefill` and `decode`
  // sides; a `both` worker may be on both.
  bool pd = false;
  std::vector<WorkerUrl> workers;
  std::vector<WorkerUrl> prefill;
  std::vector<WorkerUrl> decode;
  bool allow_register = false;                          // POST /router/workers[/leave] accepted
  PolicyKind policy = PolicyKind::kCacheAware;          // data-parallel
  PolicyKind prefill_policy = PolicyKind::kCacheAware;  // PD
  PolicyKind decode_policy = PolicyKind::kPowerOfTwo;   // PD
  uint64_t seed = 0;                                    // random and power_of_two policies
  double health_interval_s = 5;                         // between GET /health rounds
  double health_timeout_s = 2;                          // each wait of one check
  double connect_timeout_s = 2;                         // to a worker
  double worker_timeout_s = 600;  // longest silence of a worker within a request
  double read_timeout_s = 30;     // for a client's request to arrive
  double shutdown_grace_s = 30;   // in-flight requests' time after SIGTERM/SIGINT
  size_t max_body_bytes = 8 << 20;
};

// What every connection shares; touched on the io thread only.
struct RouterState {
  RouterOptions options;
  std::vector<std::unique_ptr<WorkerPool>> pools;  // data-parallel: {worker}; PD: {prefill, decode}
  bool draining = false;
  RouterCounters counters;
  size_t next_models_worker = 0;  // GET /v1/models rotates over the first pool

  explicit RouterState(RouterOptions o);
  WorkerPool& workers() { return *pools[0]; }  // data-parallel
  WorkerPool& prefill() { return *pools[0]; }  // PD
  WorkerPool& decode() { return *pools[1]; }   // PD
  size_t num_healthy() const;
  // A registration: data-parallel, any role joins the one pool; PD, the role's side(s).
  void join(const Registration& r, Clock::time_point now);
  bool leave(const WorkerUrl& url);
  std::vector<const WorkerPool*> pool_views() const;
};

// Listens and serves until SIGTERM/SIGINT, then stops accepting, lets requests in flight finish
// for shutdown_grace_s and returns. Errors (the address cannot be bound) name --host/--port.
Status run_router(const RouterOptions& options);

}  // namespace deepinfer::router

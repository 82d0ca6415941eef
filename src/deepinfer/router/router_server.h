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
#include "deepinfer/router/worker_pool.h"
#include "deepinfer/router/worker_url.h"

namespace deepinfer::router {

struct RouterOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::vector<WorkerUrl> workers;
  PolicyKind policy = PolicyKind::kCacheAware;
  uint64_t seed = 0;              // random policy
  double health_interval_s = 5;   // between GET /health rounds
  double health_timeout_s = 2;    // each wait of one check
  double connect_timeout_s = 2;   // to a worker
  double worker_timeout_s = 600;  // longest silence of a worker within a request
  double read_timeout_s = 30;     // for a client's request to arrive
  double shutdown_grace_s = 30;   // in-flight requests' time after SIGTERM/SIGINT
  size_t max_body_bytes = 8 << 20;
};

// What every connection shares; touched on the io thread only.
struct RouterState {
  RouterOptions options;
  std::unique_ptr<Policy> policy;
  WorkerPool pool;
  bool draining = false;
  int64_t in_flight = 0;  // client requests being proxied
  uint64_t retries = 0;
  size_t next_models_worker = 0;  // GET /v1/models rotates over the workers

  explicit RouterState(RouterOptions o);
};

// Listens and serves until SIGTERM/SIGINT, then stops accepting, lets requests in flight finish
// for shutdown_grace_s and returns. Errors (the address cannot be bound) name --host/--port.
Status run_router(const RouterOptions& options);

}  // namespace deepinfer::router

// Periodic GET /health on every worker, each check bounded by a timeout, so a worker that fails
// or hangs is ejected (WorkerPool::kFailedChecksToEject in a row) and readmitted when it passes
// again. Checks of different workers run concurrently; a worker's next check waits for its last.
#pragma once

#include "deepinfer/router/asio_includes.h"
#include "deepinfer/router/router_server.h"

namespace deepinfer::router {

// Runs until `stop` is set (checked between rounds).
asio::awaitable<void> health_loop(RouterState& state, const bool& stop);

}  // namespace deepinfer::router

// Periodic GET /health on every listed worker, each check bounded by a timeout, so a worker that
// fails or hangs is ejected (WorkerPool::kFailedChecksToEject in a row) and readmitted when it
// passes again. A passing check is followed by GET /load (the decode policy's input); a worker
// without /load (404, an older build) keeps its load unknown and stays healthy. Checks of
// different workers run concurrently; a worker's next check waits for its last.
#pragma once

#include "deepinfer/router/asio_includes.h"
#include "deepinfer/router/router_server.h"

namespace deepinfer::router {

// Runs until `stop` is set (checked between rounds).
asio::awaitable<void> health_loop(RouterState& state, const bool& stop);

// Drops registered workers whose heartbeats stopped, every kExpirySweepS, until `stop`.
inline constexpr double kExpirySweepS = 0.25;
asio::awaitable<void> expiry_loop(RouterState& state, const bool& stop);

}  // namespace deepinfer::router

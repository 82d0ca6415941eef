// One client connection: reads requests (keep-alive), answers /health and /metrics itself and
// proxies the OpenAI routes to a worker chosen by the policy.
#pragma once

#include "deepinfer/router/asio_includes.h"
#include "deepinfer/router/router_server.h"

namespace deepinfer::router {

asio::awaitable<void> serve_connection(tcp::socket socket, RouterState& state);

}  // namespace deepinfer::router

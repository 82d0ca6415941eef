// PD mode: a request runs as a pair, phase 1 on a prefill worker (the prompt and the first
// token; its answer is a handoff token, never streamed) and phase 2 on a decode worker (which
// fetches the state from the prefill worker and answers as a plain request would). The contract
// with the workers is in README.md ("PD mode").
#pragma once

#include "deepinfer/router/asio_includes.h"
#include "deepinfer/router/relay.h"
#include "deepinfer/router/route_info.h"
#include "deepinfer/router/router_server.h"

namespace deepinfer::router {

// Returns whether the client connection may stay open.
asio::awaitable<bool> forward_pd(beast::tcp_stream& client, bool keep_alive, ForwardRequest fwd,
                                 const RouteInfo& info, RouterState& state, RequestTimer& timer);

// What phase 1 answered, read from its 200 body: a token, or null (do it plain), or not a
// handoff at all (an error naming what is wrong).
struct HandoffAnswer {
  std::optional<std::string> token;  // none: "handoff": null
  std::string reason;                // with a null handoff, the worker's reason
};
StatusOr<HandoffAnswer> parse_handoff(std::string_view body);

}  // namespace deepinfer::router

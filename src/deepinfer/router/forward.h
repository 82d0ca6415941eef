// A client's request sent on to a worker, with retries and pass-through of the answer.
//
// Retries: an attempt that fails before any byte has gone to the client (no connection, no
// answer in time, a 503 from a loading or draining worker, a stream that ends before its first
// whole event) moves to a worker not yet tried. A non-streamed answer is read whole before it is
// sent, so it can always move. Once a stream's first event has gone out, a failure ends it with
// an SSE error event and `[DONE]`. PD mode's two phases: pd_forward.h.
#pragma once

#include "deepinfer/router/asio_includes.h"
#include "deepinfer/router/router_server.h"

namespace deepinfer::router {

// generation: a completions route, picked by the policy (PD: a prefill/decode pair); otherwise
// (GET /v1/models) any worker of the first pool. Returns whether the client connection may stay
// open.
asio::awaitable<bool> forward(beast::tcp_stream& client,
                              const http::request<http::string_body>& req, RouterState& state,
                              bool generation);

// An OpenAI error body with `code`, as the server words its own.
std::string error_json(const std::string& message, const std::string& type,
                       const std::string& code);

}  // namespace deepinfer::router

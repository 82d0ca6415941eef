// One attempt of a client's request on one worker, and the pieces that pass a worker's answer
// on to the client: whole, or as an SSE stream event by event. Shared by the data-parallel and
// the PD paths (forward.cc, pd_forward.cc).
#pragma once

#include <functional>
#include <string>

#include "deepinfer/router/asio_includes.h"
#include "deepinfer/router/client_watch.h"
#include "deepinfer/router/router_server.h"
#include "deepinfer/router/upstream.h"

namespace deepinfer::router {

// The PD headers between the router and workers. A client's own are dropped, so a client cannot
// make a decode worker fetch state from a host it names.
inline constexpr const char* kDisaggHeader = "X-Deepinfer-Disagg";
inline constexpr const char* kHandoffHeader = "X-Deepinfer-Handoff";

// The client's request as a worker gets it: headers less hop-by-hop ones, Host and the PD ones.
ForwardRequest forward_request(const http::request<http::string_body>& req);

// The router-added latency of one client request (RouterCounters::added_latency).
struct RequestTimer {
  Clock::time_point start = Clock::now();
  double waited_s = 0;  // waiting on workers, over the calls that have finished
  bool recorded = false;
  // The first byte of an answer reached the client; `call` is still open.
  void first_byte(RouterCounters& counters, const UpstreamCall& call);
};

// A worker's counters follow the attempt: outstanding (and pending prefill tokens) while it runs,
// and its queue time once the response head came.
class Attempt {
 public:
  Attempt(WorkerState& w, int64_t prefill_tokens = 0);
  ~Attempt();
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;
  void headed(const UpstreamCall& call);

 private:
  WorkerState& worker_;
  int64_t prefill_tokens_;
};

// What a ClientWatch does over `call` when the client leaves: closes the worker's connection (the
// worker cancels) and counts it (RouterCounters::client_gone).
std::function<void()> abandon_on_leave(UpstreamCall& call, RouterState& state);

// Connects, sends and reads the head, as an Attempt on `pool[i]`. A 503 (loading or draining)
// is a failure; a worker that refuses the connection is ejected. Errors name the worker's URL.
// Once `watch` saw the client leave, a failure (the call aborted) is cancelled, no worker's.
asio::awaitable<Status> start_attempt(UpstreamCall& call, WorkerPool& pool, size_t i,
                                      const ForwardRequest& req, RouterState& state,
                                      const ClientWatch& watch);

struct Outcome {
  // kClientGone: the client left while the worker computed; the call was closed (the worker
  // cancels), nothing is retried and nothing answered.
  enum Kind { kAnswered, kRetry, kTransferFailed, kClientGone } kind = kRetry;
  bool keep_alive = false;  // kAnswered: the client connection may stay open
  std::string why;          // kRetry, kTransferFailed: what went wrong, naming the worker
};

// The whole attempt: the worker's answer reaches the client, or (before any byte did) kRetry.
// decode_phase: a 502 kv_transfer_failed is kTransferFailed, not passed on.
asio::awaitable<Outcome> relay_attempt(beast::tcp_stream& client, bool client_keep_alive,
                                       ForwardRequest req, WorkerPool& pool, size_t i,
                                       RouterState& state, RequestTimer& timer,
                                       bool decode_phase = false);

// The worker's non-streamed answer, whole (status, Content-Type, Retry-After, Allow, body).
asio::awaitable<bool> send_whole(beast::tcp_stream& client, const UpstreamCall& call,
                                 std::string body, bool keep_alive);

// The router's own error answer (no worker answered).
asio::awaitable<bool> send_router_error(beast::tcp_stream& client, bool none_available,
                                        std::string last_error, bool keep_alive);

}  // namespace deepinfer::router

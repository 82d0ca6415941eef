#include "deepinfer/router/forward.h"

#include <nlohmann/json.hpp>

#include "deepinfer/router/pd_forward.h"
#include "deepinfer/router/relay.h"
#include "deepinfer/router/route_info.h"

namespace deepinfer::router {

std::string error_json(const std::string& message, const std::string& type,
                       const std::string& code) {
  nlohmann::json j = {
      {"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}}}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

// GET /v1/models and the like: the next available worker not yet tried.
std::optional<size_t> next_worker(RouterState& state, const std::vector<WorkerLoad>& loads) {
  for (size_t i = 0; i < loads.size(); ++i) {
    size_t w = (state.next_models_worker + i) % loads.size();
    if (loads[w].available) {
      state.next_models_worker = w + 1;
      return w;
    }
  }
  return std::nullopt;
}

}  // namespace

asio::awaitable<bool> forward(beast::tcp_stream& client,
                              const http::request<http::string_body>& req, RouterState& state,
                              bool generation) {
  struct InFlight {
    RouterCounters& c;
    explicit InFlight(RouterCounters& x) : c(x) { ++c.in_flight; }
    ~InFlight() { --c.in_flight; }
  } in_flight(state.counters);
  RequestTimer timer;
  RouteInfo info = generation ? route_info(req.body()) : RouteInfo{};
  ForwardRequest fwd = forward_request(req);
  if (generation && state.options.pd)
    co_return co_await forward_pd(client, req.keep_alive(), std::move(fwd), info, state, timer);
  WorkerPool& pool = state.workers();
  std::vector<bool> tried(pool.size(), false);
  std::string last_error;
  const size_t attempts = pool.size();
  for (size_t attempt = 0; attempt < attempts; ++attempt) {
    std::optional<size_t> w;
    if (generation) {
      auto pick = pool.pick(info.text, tried);
      if (pick) w = pick->worker;
    } else {
      w = next_worker(state, pool.loads(tried));
    }
    if (!w) break;
    if (tried.size() <= *w) tried.resize(*w + 1, false);
    tried[*w] = true;
    if (attempt > 0) ++state.counters.retries;
    Outcome out = co_await relay_attempt(client, req.keep_alive(), fwd, pool, *w, state, timer);
    if (out.kind == Outcome::kAnswered) co_return out.keep_alive;
    if (out.kind == Outcome::kClientGone) co_return false;  // counted where it was seen
    last_error = out.why;
  }
  co_return co_await send_router_error(client, last_error.empty(), last_error, req.keep_alive());
}

}  // namespace deepinfer::router

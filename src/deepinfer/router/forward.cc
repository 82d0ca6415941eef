#include "deepinfer/router/forward.h"

#include <nlohmann/json.hpp>

#include "deepinfer/router/route_info.h"
#include "deepinfer/router/sse_events.h"
#include "deepinfer/router/upstream.h"

namespace deepinfer::router {

std::string error_json(const std::string& message, const std::string& type,
                       const std::string& code) {
  nlohmann::json j = {
      {"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}}}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

constexpr double kClientWriteTimeoutS = 60;

// Request headers a worker needs; hop-by-hop ones and Host are the router's own.
ForwardRequest forward_request(const http::request<http::string_body>& req) {
  ForwardRequest out;
  out.method = req.method();
  out.target = std::string(req.target());
  out.body = req.body();
  for (const auto& f : req) {
    switch (f.name()) {
      case http::field::host:
      case http::field::connection:
      case http::field::keep_alive:
      case http::field::transfer_encoding:
      case http::field::content_length:
      case http::field::expect:
      case http::field::upgrade:
      case http::field::te:
        continue;
      default:
        out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
  }
  return out;
}

// The worker's counters follow the attempt: outstanding while it runs.
struct Attempt {
  WorkerState& worker;
  explicit Attempt(WorkerState& w) : worker(w) {
    ++worker.requests;
    ++worker.outstanding;
  }
  ~Attempt() { --worker.outstanding; }
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;
};

asio::awaitable<bool> write_raw(beast::tcp_stream& client, const std::string& bytes) {
  boost::system::error_code ec;
  client.expires_after(seconds(kClientWriteTimeoutS));
  co_await asio::async_write(client, asio::buffer(bytes),
                             asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec;
}

// The worker's answer, whole; bytes unchanged.
asio::awaitable<bool> send_whole(beast::tcp_stream& client, UpstreamCall& call, std::string body,
                                 bool keep_alive) {
  http::response<http::string_body> res{static_cast<http::status>(call.status()), 11};
  for (auto f : {http::field::content_type, http::field::retry_after, http::field::allow}) {
    std::string v = call.header(f);
    if (!v.empty()) res.set(f, v);
  }
  res.body() = std::move(body);
  res.prepare_payload();
  res.keep_alive(keep_alive);
  boost::system::error_code ec;
  client.expires_after(seconds(kClientWriteTimeoutS));
  co_await http::async_write(client, res, asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec && keep_alive;
}

enum class StreamEnd { kDone, kRetry, kClosed };

// Passes the worker's SSE events on as whole events. kRetry: it failed before its first event
// reached the client; `why` says how.
asio::awaitable<StreamEnd> pass_stream(beast::tcp_stream& client, UpstreamCall& call,
                                       WorkerState& worker, std::string& why) {
  SseEventBuffer events;
  bool sent = false;
  Status failure;
  for (;;) {
    auto part = co_await call.read_some();
    if (!part.ok()) {
      failure = part.status();
      break;
    }
    if (part->empty()) break;
    events.feed(*part);
    std::string out = events.take_complete();
    if (out.empty()) continue;
    if (!sent) {
      std::string reason(http::obsolete_reason(static_cast<http::status>(call.status())));
      out = "HTTP/1.1 " + std::to_string(call.status()) + " " + reason +
            "\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            "Connection: close\r\n\r\n" +
            out;
      sent = true;
    }
    // The client left: the call's destructor closes the worker's connection, which cancels.
    if (!co_await write_raw(client, out)) co_return StreamEnd::kClosed;
  }
  if (events.saw_done()) co_return StreamEnd::kDone;
  ++worker.failures;
  why = failure.ok() ? "the stream ended before [DONE]" : failure.message();
  if (!sent) co_return StreamEnd::kRetry;
  std::string msg = "worker " + worker.url.text + " failed mid-stream: " + why;
  std::fprintf(stderr, "deepinfer router: %s\n", msg.c_str());
  co_await write_raw(client, sse_error_events(msg, "worker_failed"));
  co_return StreamEnd::kClosed;
}

// GET /v1/models and the like: the next healthy worker not yet tried.
std::optional<Pick> next_worker(RouterState& state, const std::vector<WorkerLoad>& loads) {
  for (size_t i = 0; i < loads.size(); ++i) {
    size_t w = (state.next_models_worker + i) % loads.size();
    if (loads[w].available) {
      state.next_models_worker = w + 1;
      return Pick{w};
    }
  }
  return std::nullopt;
}

}  // namespace

asio::awaitable<bool> forward(beast::tcp_stream& client,
                              const http::request<http::string_body>& req, RouterState& state,
                              bool generation) {
  struct InFlight {
    RouterState& s;
    explicit InFlight(RouterState& st) : s(st) { ++s.in_flight; }
    ~InFlight() { --s.in_flight; }
  } in_flight(state);
  RouteInfo info = generation ? route_info(req.body()) : RouteInfo{};
  ForwardRequest fwd = forward_request(req);
  auto ex = co_await asio::this_coro::executor;
  std::vector<bool> tried(state.pool.size(), false);
  std::string last_error;
  for (size_t attempt = 0; attempt < state.pool.size(); ++attempt) {
    auto loads = state.pool.loads(tried);
    auto pick = generation ? state.policy->pick(info.text, loads) : next_worker(state, loads);
    if (!pick) break;
    tried[pick->worker] = true;
    WorkerState& worker = state.pool[pick->worker];
    if (attempt > 0) ++state.retries;
    if (pick->cache_hit) ++worker.cache_hits;
    Attempt counted(worker);
    UpstreamCall call(ex);
    Status st = co_await call.start(
        worker.url, fwd, {state.options.connect_timeout_s, state.options.worker_timeout_s});
    if (st.ok() && call.status() == 503) st = internal_error("answered 503 (loading or draining)");
    if (!st.ok()) {
      ++worker.failures;
      last_error = worker.url.text + ": " + st.message();
      if (!call.connected()) state.pool.eject(pick->worker, st.message());
      continue;
    }
    if (call.header(http::field::content_type).rfind("text/event-stream", 0) == 0) {
      std::string why;
      StreamEnd end = co_await pass_stream(client, call, worker, why);
      if (end == StreamEnd::kRetry) {
        last_error = worker.url.text + ": " + why;
        continue;
      }
      co_return false;  // SSE responses end the connection, as the server's do
    }
    auto body = co_await call.read_all();
    if (!body.ok()) {
      ++worker.failures;
      last_error = worker.url.text + ": " + body.status().message();
      continue;
    }
    co_return co_await send_whole(client, call, std::move(*body), req.keep_alive());
  }
  bool none = last_error.empty();
  http::response<http::string_body> res{
      none ? http::status::service_unavailable : http::status::bad_gateway, 11};
  res.set(http::field::content_type, "application/json");
  if (none) res.set(http::field::retry_after, "1");
  res.body() = none ? error_json("no healthy worker", "server_error", "no_worker_available")
                    : error_json("every worker tried failed; last: " + last_error, "server_error",
                                 "worker_failed");
  res.prepare_payload();
  res.keep_alive(req.keep_alive());
  boost::system::error_code ec;
  client.expires_after(seconds(kClientWriteTimeoutS));
  co_await http::async_write(client, res, asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec && req.keep_alive();
}

}  // namespace deepinfer::router

#include "deepinfer/router/relay.h"

#include <boost/beast/core/string.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "deepinfer/router/forward.h"
#include "deepinfer/router/sse_events.h"

namespace deepinfer::router {

namespace {

constexpr double kClientWriteTimeoutS = 60;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

asio::awaitable<bool> write_raw(beast::tcp_stream& client, const std::string& bytes) {
  boost::system::error_code ec;
  client.expires_after(seconds(kClientWriteTimeoutS));
  co_await asio::async_write(client, asio::buffer(bytes),
                             asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec;
}

enum class StreamEnd { kDone, kRetry, kClosed };

// Passes the worker's SSE events on as whole events. kRetry: it failed before its first event
// reached the client; `why` says how.
asio::awaitable<StreamEnd> pass_stream(beast::tcp_stream& client, UpstreamCall& call,
                                       WorkerState& worker, RouterState& state, RequestTimer& timer,
                                       std::string& why) {
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
    }
    // The client left: the call's destructor closes the worker's connection, which cancels.
    if (!co_await write_raw(client, out)) co_return StreamEnd::kClosed;
    if (!sent) timer.first_byte(state.counters, call);
    sent = true;
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

bool is_transfer_failure(int status, const std::string& body) {
  if (status != 502) return false;
  auto j = nlohmann::json::parse(body, nullptr, false);
  return j.is_object() && j.contains("error") && j["error"].is_object() &&
         j["error"].value("code", "") == "kv_transfer_failed";
}

}  // namespace

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
        if (beast::iequals(f.name_string(), kDisaggHeader) ||
            beast::iequals(f.name_string(), kHandoffHeader))
          continue;
        out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
  }
  return out;
}

void RequestTimer::first_byte(RouterCounters& counters, const UpstreamCall& call) {
  if (recorded) return;
  recorded = true;
  counters.added_latency.add(std::max(0.0, since(start) - waited_s - call.waited_s()));
}

Attempt::Attempt(WorkerState& w, int64_t prefill_tokens)
    : worker_(w), prefill_tokens_(prefill_tokens) {
  ++worker_.requests;
  ++worker_.outstanding;
  worker_.pending_prefill_tokens += prefill_tokens_;
}

Attempt::~Attempt() {
  --worker_.outstanding;
  worker_.pending_prefill_tokens -= prefill_tokens_;
}

void Attempt::headed(const UpstreamCall& call) {
  worker_.first_byte_s_sum += call.first_byte_s();
  ++worker_.first_byte_count;
}

std::function<void()> abandon_on_leave(UpstreamCall& call, RouterState& state) {
  return [&call, &state] {
    call.abort();
    ++state.counters.client_gone;
  };
}

asio::awaitable<Status> start_attempt(UpstreamCall& call, WorkerPool& pool, size_t i,
                                      const ForwardRequest& req, RouterState& state,
                                      const ClientWatch& watch) {
  WorkerState& w = pool[i];
  Status st = co_await call.start(
      w.url, req, {state.options.connect_timeout_s, state.options.worker_timeout_s});
  if (watch.gone()) co_return Status(StatusCode::kCancelled, "the client left");
  if (st.ok() && call.status() == 503) st = internal_error("answered 503 (loading or draining)");
  if (!st.ok()) {
    ++w.failures;
    if (!call.connected()) pool.eject(i, st.message());
    co_return internal_error(w.url.text + ": " + st.message());
  }
  co_return ok_status();
}

asio::awaitable<Outcome> relay_attempt(beast::tcp_stream& client, bool client_keep_alive,
                                       ForwardRequest req, WorkerPool& pool, size_t i,
                                       RouterState& state, RequestTimer& timer, bool decode_phase) {
  WorkerState& worker = pool[i];
  Attempt counted(worker);
  UpstreamCall call(co_await asio::this_coro::executor);
  struct AddWait {  // whatever happens, this call's waiting is the worker's time
    RequestTimer& t;
    UpstreamCall& c;
    ~AddWait() { t.waited_s += c.waited_s(); }
  } add_wait{timer, call};
  const Outcome gone{Outcome::kClientGone, false, "the client left"};
  // Until the answer's first byte is written, nothing else would notice the client leave.
  auto watch = std::make_unique<ClientWatch>(client, abandon_on_leave(call, state));
  Status st = co_await start_attempt(call, pool, i, req, state, *watch);
  if (watch->gone()) co_return gone;
  if (!st.ok()) co_return Outcome{Outcome::kRetry, false, st.message()};
  counted.headed(call);
  if (call.header(http::field::content_type).rfind("text/event-stream", 0) == 0) {
    watch.reset();  // from here each event's write notices a client that left
    std::string why;
    StreamEnd end = co_await pass_stream(client, call, worker, state, timer, why);
    if (end == StreamEnd::kRetry)
      co_return Outcome{Outcome::kRetry, false, worker.url.text + ": " + why};
    co_return Outcome{Outcome::kAnswered, false,
                      ""};  // SSE answers end the connection, as the server's do
  }
  auto body = co_await call.read_all();
  if (watch->gone()) co_return gone;
  watch.reset();
  if (!body.ok()) {
    ++worker.failures;
    co_return Outcome{Outcome::kRetry, false, worker.url.text + ": " + body.status().message()};
  }
  if (decode_phase && is_transfer_failure(call.status(), *body))
    co_return Outcome{Outcome::kTransferFailed, false,
                      worker.url.text + ": kv_transfer_failed: " + *body};
  timer.first_byte(state.counters, call);
  bool keep = co_await send_whole(client, call, std::move(*body), client_keep_alive);
  co_return Outcome{Outcome::kAnswered, keep, ""};
}

asio::awaitable<bool> send_whole(beast::tcp_stream& client, const UpstreamCall& call,
                                 std::string body, bool keep_alive) {
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

asio::awaitable<bool> send_router_error(beast::tcp_stream& client, bool none_available,
                                        std::string last_error, bool keep_alive) {
  http::response<http::string_body> res{
      none_available ? http::status::service_unavailable : http::status::bad_gateway, 11};
  res.set(http::field::content_type, "application/json");
  if (none_available) res.set(http::field::retry_after, "1");
  res.body() = none_available
                   ? error_json("no healthy worker", "server_error", "no_worker_available")
                   : error_json("every worker tried failed; last: " + last_error, "server_error",
                                "worker_failed");
  res.prepare_payload();
  res.keep_alive(keep_alive);
  boost::system::error_code ec;
  client.expires_after(seconds(kClientWriteTimeoutS));
  co_await http::async_write(client, res, asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec && keep_alive;
}

}  // namespace deepinfer::router

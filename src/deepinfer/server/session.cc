#include "deepinfer/server/session.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>

#include "deepinfer/server/request_checks.h"

namespace deepinfer::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using nlohmann::json;

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

std::vector<std::string_view> values_of(const http::request_header<>& h, http::field f) {
  std::vector<std::string_view> out;
  auto [first, last] = h.equal_range(f);
  for (auto it = first; it != last; ++it) out.emplace_back(it->value().data(), it->value().size());
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  return beast::iequals(beast::string_view(a.data(), a.size()),
                        beast::string_view(b.data(), b.size()));
}

std::string_view sv(beast::string_view s) { return {s.data(), s.size()}; }

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
// Pipelined bytes kept while a response is being computed; past this the peer waits.
constexpr size_t kMaxBufferedAhead = 1 << 20;

}  // namespace

Session::Session(asio::ip::tcp::socket socket, ServerState* state)
    : socket_(std::move(socket)),
      state_(state),
      timer_(socket_.get_executor()),
      request_timer_(socket_.get_executor()) {
  beast::error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  ++state_->connections;
}

// May run on the engine thread (its callback holds the last reference): touch no shared state.
Session::~Session() = default;

void Session::start() { next_request(); }

void Session::guarded(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "deepinfer serve: internal error on %s %s: %s\n", method_.c_str(),
                 path_.c_str(), e.what());
    if (closed_) return;
    if (response_started_) return close();
    keep_alive_ = false;
    send_error(
        {500, std::string("internal error: ") + e.what(), "internal_error", "", "internal_error"});
  }
}

void Session::next_request() {
  if (closed_) return;
  parser_.emplace();
  configure_parser(*parser_, state_->limits);
  if (buffer_.size() > 0) return read_header();  // pipelined: the next request is here already
  wait_for_bytes();
}

// An idle connection costs a descriptor: it gets --keep-alive-timeout to start a request.
void Session::wait_for_bytes() {
  arm_timer(state_->options.keep_alive_timeout_s, &Session::close);
  socket_.async_wait(asio::ip::tcp::socket::wait_read,
                     [self = shared_from_this()](beast::error_code ec) {
                       if (ec) return self->close();
                       self->read_header();
                     });
}

void Session::read_header() {
  arm_timer(state_->options.read_timeout_s, &Session::close);
  http::async_read_header(socket_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            self->guarded([&] { self->on_header(ec); });
                          });
}

void Session::on_header(beast::error_code ec) {
  if (ec) {
    disarm_timer();
    std::optional<ApiError> err = head_error(ec, !parser_->get().target().empty(), state_->limits);
    if (!err) return close();
    keep_alive_ = false;
    linger_ = true;
    begin_exchange("-", "-");
    return send_error(*err);
  }
  const auto& req = parser_->get();
  std::string target(req.target());
  begin_exchange(std::string(req.method_string()), target.substr(0, target.find('?')));
  keep_alive_ = req.keep_alive() && !state_->draining;
  if (!check_head()) return;
  if (parser_->is_done()) return on_body({});
  auto read_body = [self = shared_from_this()] {
    http::async_read(
        self->socket_, self->buffer_, *self->parser_,
        [self](beast::error_code e, size_t) { self->guarded([&] { self->on_body(e); }); });
  };
  const auto expect = values_of(req, http::field::expect);
  if (expect.size() == 1 && iequals(expect[0], "100-continue")) {
    return asio::async_write(socket_, asio::buffer(kContinue.data(), kContinue.size()),
                             [self = shared_from_this(), read_body](beast::error_code e, size_t) {
                               if (e) return self->close();
                               read_body();
                             });
  }
  read_body();
}

bool Session::check_head() {
  const auto& req = parser_->get();
  const ServerOptions& o = state_->options;
  // Refusing before the body is read: the connection cannot be reused.
  auto refuse = [&](const ApiError& e, Headers extra = {}) {
    if (!parser_->is_done()) {
      keep_alive_ = false;
      linger_ = true;
    }
    send_error(e, std::move(extra));
    return false;
  };
  if (auto e = check_target(sv(req.target()), state_->limits)) return refuse(*e);
  if (o.api_key.empty()) {
    auto hosts = values_of(req, http::field::host);
    if (auto e = check_host(hosts, o.allowed_hosts)) return refuse(*e);
  }
  const bool open_route = path_ == "/health" || (path_ == "/metrics" && !o.metrics_require_key);
  if (!o.api_key.empty() && !open_route) {
    auto auth = values_of(req, http::field::authorization);
    if (auto e = check_authorization(auth, o.api_key)) return refuse(*e);
  }
  if (req.method() == http::verb::post) {
    auto types = values_of(req, http::field::content_type);
    if (auto e = check_content_type(types)) return refuse(*e);
    if (auto len = parser_->content_length(); len && *len > state_->limits.max_body_bytes)
      return refuse(body_too_large_error(state_->limits.max_body_bytes));
  }
  return true;
}

void Session::on_body(beast::error_code ec) {
  disarm_timer();
  if (ec == http::error::body_limit) {
    keep_alive_ = false;
    linger_ = true;
    return send_error(body_too_large_error(state_->limits.max_body_bytes));
  }
  if (ec) return close();
  handle_request();
}

namespace {

// GET /expert_counts: the routed picks per main layer per expert (EPLB's input), in the counts
// format `deepinfer eplb plan --counts` reads (model/eplb/placement_json.h).
json expert_counts_body(const std::vector<std::vector<uint64_t>>& counts) {
  return {{"num_layers", counts.size()},
          {"num_experts", counts.empty() ? 0 : counts[0].size()},
          {"counts", counts}};
}

}  // namespace

void Session::handle_request() {
  const auto& req = parser_->get();
  const ServerOptions& o = state_->options;
  const bool get = req.method() == http::verb::get;
  const bool post = req.method() == http::verb::post;
  Engine* engine = state_->engine.load();
  if (path_ == "/health") {
    const bool ready = engine != nullptr && !state_->draining;
    return send(ready ? 200 : 503, ready ? "{\"status\":\"ok\"}"
                                         : (state_->draining ? "{\"status\":\"draining\"}"
                                                             : "{\"status\":\"loading\"}"));
  }
  if (path_ == "/metrics" && get)
    return send(200, state_->metrics.render(o.primary_model(), engine) + render_disagg_metrics(),
                "text/plain; version=0.0.4; charset=utf-8");
  if (path_ == "/load" && get) return send_load();
  if (path_ == "/expert_counts" && get) {
    if (engine == nullptr)
      return send_error({503, "the model is still loading", "server_error", "", "loading"});
    return send_json(200, expert_counts_body(engine->expert_counts()));
  }
  if (path_ == "/v1/models" && get) return send_json(200, models_response(o.model_names, created_));
  constexpr std::string_view kModelPrefix = "/v1/models/";
  if (get && path_.size() > kModelPrefix.size() && path_.rfind(kModelPrefix, 0) == 0) {
    const std::string id = path_.substr(kModelPrefix.size());
    for (const std::string& name : o.model_names)
      if (name == id) return send_json(200, model_response(id, created_));
    return send_error(model_not_found_error(id));
  }
  std::optional<Endpoint> ep;
  if (path_ == "/v1/completions") ep = Endpoint::kCompletions;
  if (path_ == "/v1/chat/completions") ep = Endpoint::kChatCompletions;
  if (!ep || !post) {
    if (ep || path_ == "/v1/models" || path_ == "/metrics" || path_ == "/load" ||
        path_ == "/expert_counts")
      return send_error({405, req.method_string().to_string() + " is not allowed on " + path_,
                         "invalid_request_error", "", "method_not_allowed"},
                        {{"Allow", ep ? "POST" : "GET"}});
    return send_error(not_found_error(path_));
  }
  if (state_->draining)
    return send_error({503, "the server is shutting down", "server_error", "", "shutting_down"});
  if (engine == nullptr)
    return send_error({503, "the model is still loading", "server_error", "", "loading"},
                      {{"Retry-After", "5"}});
  engine_ = engine;
  if (!read_disagg_headers()) return;
  start_generation(*ep);
}

void Session::begin_exchange(std::string method, std::string path) {
  start_ = Clock::now();
  created_ = now_s();  // keep-alive: each request gets its own timestamp
  method_ = std::move(method);
  path_ = std::move(path);
  busy_ = true;
  ++state_->metrics.busy;
}

void Session::end_exchange() {
  if (!busy_) return;
  busy_ = false;
  --state_->metrics.busy;
}

void Session::send_error(const ApiError& e, Headers extra) {
  send_json(e.http_status, error_body(e), std::move(extra));
}

void Session::send_json(int status, const json& body, Headers extra) {
  // Lenient: messages may quote the request (a path, a grammar) with invalid UTF-8 in it.
  send(status, body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json",
       std::move(extra));
}

void Session::send(int status, std::string body, std::string_view content_type, Headers extra) {
  if (closed_) return;
  log_access(status);
  response_started_ = true;
  auto res =
      std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), 11);
  res->set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
  res->set(http::field::server, "deepinfer");
  for (auto& [name, value] : extra) res->set(name, value);
  res->keep_alive(keep_alive_ && !state_->draining);
  res->body() = std::move(body);
  res->prepare_payload();
  http::async_write(socket_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
    self->on_response_written(ec);
  });
}

void Session::on_response_written(beast::error_code ec) {
  end_exchange();
  response_started_ = false;
  if (!ec && linger_) return linger_close();
  if (ec || !keep_alive_ || state_->draining || peer_gone_) return close();
  reset_generation();
  if (watching_) return stop_watching_then(&Session::next_request);
  next_request();
}

// While a response is computed, a read notices the client leaving (then the engine request is
// cancelled); bytes of a pipelined next request stay in buffer_ for later.
void Session::watch_peer() {
  if (watching_ || closed_) return;
  watching_ = true;
  socket_.async_read_some(buffer_.prepare(64 << 10),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->watching_ = false;
                            if (!ec) self->buffer_.commit(n);
                            if (self->after_watch_) {
                              auto next = std::exchange(self->after_watch_, nullptr);
                              return (self.get()->*next)();
                            }
                            if (ec == asio::error::operation_aborted) return;
                            if (ec) {
                              self->peer_gone_ = true;
                              self->cancel();
                              return;
                            }
                            if (self->generating_ && self->buffer_.size() < kMaxBufferedAhead)
                              self->watch_peer();
                          });
}

void Session::stop_watching_then(void (Session::*next)()) {
  after_watch_ = next;
  beast::error_code ec;
  socket_.cancel(ec);  // the watch read ends with operation_aborted and runs `next`
}

void Session::arm_timer(double secs, void (Session::*on_expiry)()) {
  const uint64_t gen = ++timer_gen_;
  timer_.expires_after(seconds(secs));
  timer_.async_wait([self = shared_from_this(), gen, on_expiry](beast::error_code ec) {
    if (ec || gen != self->timer_gen_) return;
    (self.get()->*on_expiry)();
  });
}

void Session::disarm_timer() {
  ++timer_gen_;
  timer_.cancel();
}

// The client may still be sending the body we refused: closing now would reset the connection
// and could destroy our response before it is read. Half-close, discard input until the
// client closes too (at most a few seconds), then close.
void Session::linger_close() {
  beast::error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  arm_timer(5, &Session::close);
  discard();
}

void Session::discard() {
  socket_.async_read_some(asio::buffer(scratch_),
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec) return self->close();
                            self->discard();
                          });
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  end_exchange();
  disarm_timer();
  request_timer_.cancel();
  beast::error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  --state_->connections;
}

void Session::log_access(int status) {
  state_->metrics.on_http_status(status);
  if (!state_->log) return;
  AccessRecord r;
  r.remote = remote_;
  r.method = method_;
  r.path = path_;
  r.status = status;
  r.duration_s = std::chrono::duration<double>(Clock::now() - start_).count();
  r.request_id = id_;
  if (admitted_ && req_) {
    r.stream = req_->stream;
    r.prompt_tokens = prompt_tokens_;
    r.completion_tokens = tokens_seen_;
    r.finish_reason = finish_reason_;
  }
  state_->log->write(r);
}

}  // namespace deepinfer::server

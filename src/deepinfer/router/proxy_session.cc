#include "deepinfer/router/proxy_session.h"

#include "deepinfer/router/forward.h"
#include "deepinfer/router/registration.h"

namespace deepinfer::router {

namespace {

constexpr size_t kMaxHeaderBytes = 16 << 10;

asio::awaitable<bool> reply(beast::tcp_stream& client, http::status status,
                            std::string content_type, std::string body, bool keep_alive,
                            std::vector<std::pair<http::field, std::string>> extra = {}) {
  http::response<http::string_body> res{status, 11};
  res.set(http::field::content_type, content_type);
  for (auto& [f, v] : extra) res.set(f, v);
  res.body() = std::move(body);
  res.prepare_payload();
  res.keep_alive(keep_alive);
  boost::system::error_code ec;
  client.expires_after(seconds(30));
  co_await http::async_write(client, res, asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec && keep_alive;
}

// Strings by value: a coroutine keeps a reference parameter, not what it refers to.
asio::awaitable<bool> error_reply(beast::tcp_stream& client, http::status status,
                                  std::string message, std::string code, bool keep_alive,
                                  std::vector<std::pair<http::field, std::string>> extra = {}) {
  std::string type = static_cast<int>(status) >= 500 ? "server_error" : "invalid_request_error";
  co_return co_await reply(client, status, "application/json", error_json(message, type, code),
                           keep_alive, std::move(extra));
}

// Answers one request; returns whether the connection stays open.
asio::awaitable<bool> handle(beast::tcp_stream& client, const http::request<http::string_body>& req,
                             RouterState& state) {
  std::string_view target(req.target().data(), req.target().size());
  std::string_view path = target.substr(0, target.find('?'));
  bool keep = req.keep_alive();
  bool get = req.method() == http::verb::get;
  bool post = req.method() == http::verb::post;
  auto wrong_method = [&](const char* allow) {
    return error_reply(client, http::status::method_not_allowed,
                       "method not allowed on " + std::string(path), "method_not_allowed", keep,
                       {{http::field::allow, allow}});
  };
  if (path == "/health") {
    if (!get) co_return co_await wrong_method("GET");
    bool ready = !state.draining && state.num_healthy() > 0;
    co_return co_await reply(
        client, ready ? http::status::ok : http::status::service_unavailable, "application/json",
        ready ? R"({"status":"ok"})"
              : (state.draining ? R"({"status":"draining"})" : R"({"status":"no healthy worker"})"),
        keep);
  }
  if (path == "/metrics") {
    if (!get) co_return co_await wrong_method("GET");
    co_return co_await reply(client, http::status::ok, "text/plain; version=0.0.4",
                             render_router_metrics(state.pool_views(), state.counters), keep);
  }
  if (path == "/router/workers" || path == "/router/workers/leave") {
    if (!post) co_return co_await wrong_method("POST");
    if (!state.options.allow_register)
      co_return co_await error_reply(client, http::status::forbidden,
                                     "worker registration is off (start the router with "
                                     "--allow-register)",
                                     "registration_disabled", keep);
    bool leave = path == "/router/workers/leave";
    auto r = parse_registration(req.body(), leave);
    if (!r.ok())
      co_return co_await error_reply(client, http::status::bad_request, r.status().message(),
                                     "invalid_registration", keep);
    if (leave)
      state.leave(r->url);
    else
      state.join(*r, Clock::now());
    co_return co_await reply(client, http::status::ok, "application/json", "{}", keep);
  }
  bool generation = path == "/v1/chat/completions" || path == "/v1/completions";
  bool models = path == "/v1/models" || path.rfind("/v1/models/", 0) == 0;
  if (!generation && !models)
    co_return co_await error_reply(client, http::status::not_found, "no route " + std::string(path),
                                   "not_found", keep);
  if (generation && !post) co_return co_await wrong_method("POST");
  if (models && !get) co_return co_await wrong_method("GET");
  if (state.draining)
    co_return co_await error_reply(client, http::status::service_unavailable,
                                   "the router is shutting down", "shutting_down", false);
  co_return co_await forward(client, req, state, generation);
}

}  // namespace

asio::awaitable<void> serve_connection(tcp::socket socket, RouterState& state) {
  boost::system::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  beast::tcp_stream client(std::move(socket));
  beast::flat_buffer buf;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kMaxHeaderBytes);
    parser.body_limit(state.options.max_body_bytes);
    client.expires_after(seconds(state.options.read_timeout_s));
    co_await http::async_read(client, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::body_limit) {
      co_await error_reply(client, http::status::payload_too_large, "request body too large",
                           "request_too_large", false);
      break;
    }
    if (ec == http::error::header_limit) {
      co_await error_reply(client, http::status::request_header_fields_too_large,
                           "request header too large", "header_too_large", false);
      break;
    }
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::connection_reset || ec == asio::error::eof) {
      break;
    }
    if (ec) {
      co_await error_reply(client, http::status::bad_request, "malformed request: " + ec.message(),
                           "bad_request", false);
      break;
    }
    if (!co_await handle(client, parser.get(), state)) break;
  }
  client.socket().shutdown(tcp::socket::shutdown_send, ec);
  client.close();
}

}  // namespace deepinfer::router

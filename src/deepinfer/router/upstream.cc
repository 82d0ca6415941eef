#include "deepinfer/router/upstream.h"

#include <limits>

namespace deepinfer::router {

namespace {

std::string describe(const boost::system::error_code& ec) {
  return ec == beast::error::timeout ? "timed out" : ec.message();
}

}  // namespace

UpstreamCall::UpstreamCall(asio::any_io_executor ex) : resolver_(ex), stream_(ex) {
  parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
}

void UpstreamCall::abort() {
  boost::system::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.socket().close(ec);
}

std::string UpstreamCall::header(http::field f) const {
  auto it = parser_.get().find(f);
  return it == parser_.get().end() ? std::string() : std::string(it->value());
}

asio::awaitable<Status> UpstreamCall::start(const WorkerUrl& url, const ForwardRequest& req,
                                            UpstreamTimeouts timeouts) {
  timeouts_ = timeouts;
  boost::system::error_code ec;
  auto hosts = co_await resolver_.async_resolve(url.host, std::to_string(url.port),
                                                asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return internal_error("cannot resolve " + url.host + ": " + ec.message());
  stream_.expires_after(seconds(timeouts.connect_s));
  co_await stream_.async_connect(hosts, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return internal_error("cannot connect: " + describe(ec));
  connected_ = true;
  stream_.socket().set_option(tcp::no_delay(true), ec);

  http::request<http::string_body> out{req.method, req.target, 11};
  out.set(http::field::host, url.host + ":" + std::to_string(url.port));
  for (const auto& [name, value] : req.headers) out.insert(name, value);
  out.body() = req.body;
  out.prepare_payload();
  out.keep_alive(false);
  stream_.expires_after(seconds(timeouts.idle_s));
  co_await http::async_write(stream_, out, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return internal_error("sending the request: " + describe(ec));
  stream_.expires_after(seconds(timeouts.idle_s));
  auto sent = std::chrono::steady_clock::now();
  co_await http::async_read_header(stream_, buf_, parser_,
                                   asio::redirect_error(asio::use_awaitable, ec));
  first_byte_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  waited_s_ += first_byte_s_;
  if (ec) co_return internal_error("reading the response head: " + describe(ec));
  co_return ok_status();
}

asio::awaitable<StatusOr<std::string_view>> UpstreamCall::read_some() {
  while (!parser_.is_done()) {
    parser_.get().body().data = chunk_;
    parser_.get().body().size = sizeof chunk_;
    boost::system::error_code ec;
    stream_.expires_after(seconds(timeouts_.idle_s));
    auto t0 = std::chrono::steady_clock::now();
    co_await http::async_read_some(stream_, buf_, parser_,
                                   asio::redirect_error(asio::use_awaitable, ec));
    waited_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return internal_error("reading the response: " + describe(ec));
    size_t n = sizeof chunk_ - parser_.get().body().size;
    if (n > 0) co_return std::string_view(chunk_, n);
  }
  co_return std::string_view();
}

asio::awaitable<StatusOr<std::string>> UpstreamCall::read_all() {
  std::string body;
  for (;;) {
    auto part = co_await read_some();
    if (!part.ok()) co_return part.status();
    if (part->empty()) co_return body;
    body.append(*part);
  }
}

asio::awaitable<StatusOr<SmallAnswer>> get_small(asio::any_io_executor ex, const WorkerUrl& url,
                                                 std::string target, double timeout_s) {
  UpstreamCall call(ex);
  ForwardRequest req;
  req.target = std::move(target);
  Status st = co_await call.start(url, req, {timeout_s, timeout_s});
  if (!st.ok()) co_return st;
  auto body = co_await call.read_all();
  if (!body.ok()) co_return body.status();
  co_return SmallAnswer{call.status(), std::move(*body)};
}

}  // namespace deepinfer::router

// One request to a worker over its own connection (Connection: close): connect, send, read the
// response head, then the body as it arrives. Every wait is bounded, so a hanging worker ends
// in an error, never a stuck request.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/router/asio_includes.h"
#include "deepinfer/router/worker_url.h"

namespace deepinfer::router {

struct ForwardRequest {
  http::verb method = http::verb::get;
  std::string target;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // passed through to the worker
};

struct UpstreamTimeouts {
  double connect_s = 2;
  double idle_s = 600;  // longest silence from the worker: first byte included
};

class UpstreamCall {
 public:
  explicit UpstreamCall(asio::any_io_executor ex);
  // Connects, sends and reads the response head. On an error, connected() tells a worker that is
  // down (no connection) from one that did not answer in time or properly.
  asio::awaitable<Status> start(const WorkerUrl& url, const ForwardRequest& req,
                                UpstreamTimeouts timeouts);
  bool connected() const { return connected_; }
  // Closes the worker's connection (the worker cancels the request); pending reads fail.
  void abort();
  int status() const { return parser_.get().result_int(); }
  std::string header(http::field f) const;
  // The next bytes of the body, decoded from its framing; empty once it is complete.
  asio::awaitable<StatusOr<std::string_view>> read_some();
  // The whole (rest of the) body.
  asio::awaitable<StatusOr<std::string>> read_all();
  // Seconds from the request written to the response head (the worker's queue time).
  double first_byte_s() const { return first_byte_s_; }
  // Seconds spent waiting for the worker's bytes (head and body reads): the worker's time, not
  // the router's.
  double waited_s() const { return waited_s_; }

 private:
  tcp::resolver resolver_;
  beast::tcp_stream stream_;
  beast::flat_buffer buf_;
  http::response_parser<http::buffer_body> parser_;
  UpstreamTimeouts timeouts_;
  bool connected_ = false;
  double first_byte_s_ = 0;
  double waited_s_ = 0;
  char chunk_[16384];
};

struct SmallAnswer {
  int status = 0;
  std::string body;
};
// GET `target` within timeout_s (each wait), the whole answer; an error when there is none.
asio::awaitable<StatusOr<SmallAnswer>> get_small(asio::any_io_executor ex, const WorkerUrl& url,
                                                 std::string target, double timeout_s);

}  // namespace deepinfer::router

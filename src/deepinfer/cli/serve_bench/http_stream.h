// A small blocking HTTP/1.1 client for `deepinfer bench serve`: one connection per request, the
// response body handed over as it arrives (Content-Length, chunked, or until the server closes,
// as our SSE responses do), so a streaming client can time every chunk.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "deepinfer/base/status.h"

namespace deepinfer::cli::serve_bench {

// http://host[:port][/prefix]; errors name the URL.
struct BaseUrl {
  std::string host;
  int port = 80;
  std::string prefix;  // path before the endpoint, without a trailing '/'
};
StatusOr<BaseUrl> parse_base_url(const std::string& url);

// Incremental parse of one response: status line and headers, then the body decoded from its
// framing. feed() returns an error for a malformed response.
class ResponseReader {
 public:
  using BodyFn = std::function<void(std::string_view)>;
  explicit ResponseReader(BodyFn on_body) : on_body_(std::move(on_body)) {}
  Status feed(std::string_view bytes);
  // The connection closed: complete only for a body framed by the close, or already complete.
  Status finish();
  bool done() const { return state_ == State::kDone; }
  int status() const { return status_; }

 private:
  enum class State { kHead, kBody, kChunkSize, kChunkData, kChunkDataEnd, kTrailer, kDone };
  Status parse_head(std::string_view head);
  State state_ = State::kHead;
  BodyFn on_body_;
  std::string buf_;
  int status_ = 0;
  bool chunked_ = false, until_close_ = false;
  int64_t remaining_ = 0;  // Content-Length left, or the current chunk's bytes left
};

struct HttpResult {
  int status = 0;
};

// POSTs a JSON body (GET when body is empty) to base.prefix + path; on_body sees the decoded
// body as it arrives. timeout_s bounds every wait for the server.
StatusOr<HttpResult> http_request(const BaseUrl& base, const std::string& path,
                                  const std::string& body, double timeout_s,
                                  const ResponseReader::BodyFn& on_body);

}  // namespace deepinfer::cli::serve_bench

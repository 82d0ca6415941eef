// How a request's bytes become a request or an error status: Beast's parser with our limits,
// and the classification of what it refuses (400, 413, 414, 431). The session reads with the
// same parser configuration; `parse_pipelined` runs it over a byte string for the fuzzer and
// the tests.
#pragma once

#include <boost/beast/http.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deepinfer/server/protocol.h"

namespace deepinfer::server {

struct HttpLimits {
  size_t max_header_bytes = 16 << 10;
  size_t max_url_bytes = 8 << 10;
  size_t max_body_bytes = 8 << 20;
};

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// A fresh parser with the limits applied (Beast's defaults are replaced).
void configure_parser(RequestParser& parser, const HttpLimits& limits);

// The answer when reading a request's head failed with `ec`. Over the header limit it is 414
// while the request line is still unread (`request_line_done` false: the target is what is too
// long) and 431 once the fields are. Empty: close silently (the peer went away or the stream
// ended between requests).
std::optional<ApiError> head_error(const boost::system::error_code& ec, bool request_line_done,
                                   const HttpLimits& limits);

// 414 when the request target is longer than the limit.
std::optional<ApiError> check_target(std::string_view target, const HttpLimits& limits);

// One request of a byte string, as the session would see it.
struct ParsedHttpRequest {
  std::string method, target, body;
  std::vector<std::pair<std::string, std::string>> fields;
  bool keep_alive = false;
  std::optional<ApiError> error;  // set: the request was refused and the connection ends
};

// Parses requests back to back (pipelining) until the bytes run out or one is refused.
std::vector<ParsedHttpRequest> parse_pipelined(std::string_view bytes, const HttpLimits& limits);

}  // namespace deepinfer::server

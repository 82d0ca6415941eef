#include "deepinfer/server/http_parse.h"

#include <boost/asio/buffer.hpp>

namespace deepinfer::server {

namespace http = boost::beast::http;

void configure_parser(RequestParser& parser, const HttpLimits& limits) {
  parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  parser.body_limit(limits.max_body_bytes);
}

std::optional<ApiError> head_error(const boost::system::error_code& ec, bool request_line_done,
                                   const HttpLimits& limits) {
  if (ec == http::error::end_of_stream || ec == boost::asio::error::eof ||
      ec == boost::asio::error::operation_aborted || ec == boost::asio::error::connection_reset)
    return std::nullopt;
  if (ec == http::error::header_limit) {
    if (!request_line_done)
      return ApiError{
          414, "request target longer than " + std::to_string(limits.max_url_bytes) + " bytes",
          "invalid_request_error", "", "uri_too_long"};
    return ApiError{
        431, "request header fields exceed " + std::to_string(limits.max_header_bytes) + " bytes",
        "invalid_request_error", "", "header_fields_too_large"};
  }
  if (ec == http::error::body_limit) return body_too_large_error(limits.max_body_bytes);
  if (ec.category() == http::make_error_code(http::error::bad_target).category() ||
      ec == http::error::partial_message)
    return ApiError{400, "malformed HTTP request: " + ec.message(), "invalid_request_error", "",
                    "bad_request"};
  return std::nullopt;  // a socket error: nobody to answer
}

std::optional<ApiError> check_target(std::string_view target, const HttpLimits& limits) {
  if (target.size() <= limits.max_url_bytes) return std::nullopt;
  return ApiError{414,
                  "request target longer than " + std::to_string(limits.max_url_bytes) + " bytes",
                  "invalid_request_error", "", "uri_too_long"};
}

std::vector<ParsedHttpRequest> parse_pipelined(std::string_view bytes, const HttpLimits& limits) {
  std::vector<ParsedHttpRequest> out;
  while (!bytes.empty()) {
    RequestParser parser;
    configure_parser(parser, limits);
    parser.eager(true);
    ParsedHttpRequest r;
    boost::system::error_code ec;
    // Beast consumes whole lines; need_more with nothing consumed means the bytes ran out.
    while (!parser.is_done() && !bytes.empty()) {
      const size_t used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
      bytes.remove_prefix(used);
      if (ec == http::error::need_more) ec = {};
      if (ec || used == 0) break;
    }
    if (!parser.is_done()) {
      if (!ec) return out;  // the bytes ended mid-request: the session would wait for more
      r.error = head_error(ec, !parser.get().target().empty(), limits);
      if (!r.error)
        r.error =
            ApiError{400, "malformed HTTP request", "invalid_request_error", "", "bad_request"};
      out.push_back(std::move(r));
      return out;
    }
    const auto& req = parser.get();
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.body = req.body();
    r.keep_alive = req.keep_alive();
    for (const auto& f : req) r.fields.emplace_back(f.name_string(), f.value());
    r.error = check_target(r.target, limits);
    const bool stop = r.error.has_value() || !r.keep_alive;
    out.push_back(std::move(r));
    if (stop) break;
  }
  return out;
}

}  // namespace deepinfer::server

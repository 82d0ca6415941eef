// OpenAI-style error bodies and the fixed errors of the HTTP layer (protocol.h).
#include "deepinfer/server/protocol.h"

namespace deepinfer::server {

using nlohmann::json;

namespace {

// The code of an error that did not name one: clients switch on `code`, so it is never null.
const char* default_code(int http_status) {
  switch (http_status) {
    case 400:
      return "invalid_value";
    case 401:
      return "invalid_api_key";
    case 404:
      return "not_found";
    case 408:
      return "request_timeout";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_exceeded";
    case 503:
      return "service_unavailable";
  }
  return http_status >= 500 ? "internal_error" : "invalid_request";
}

}  // namespace

json error_body(const ApiError& e) {
  json err = {{"message", e.message},
              {"type", e.type},
              {"param", nullptr},
              {"code", e.code.empty() ? default_code(e.http_status) : e.code}};
  if (!e.param.empty()) err["param"] = e.param;
  return {{"error", err}};
}

ApiError not_found_error(std::string_view path) {
  return {404, "no route for " + std::string(path), "invalid_request_error", "", "not_found"};
}

ApiError model_not_found_error(std::string_view name) {
  return {404, "The model `" + std::string(name) + "` does not exist.", "invalid_request_error",
          "model", "model_not_found"};
}

ApiError json_too_deep_error() {
  return {400,
          "request body nests JSON arrays/objects deeper than " + std::to_string(kMaxJsonDepth) +
              " levels",
          "invalid_request_error", "", "json_too_deep"};
}

ApiError unauthorized_error() {
  return {401, "invalid or missing API key (Authorization: Bearer <key>)", "authentication_error",
          "", "invalid_api_key"};
}

ApiError body_too_large_error(size_t limit) {
  return {413, "request body exceeds " + std::to_string(limit) + " bytes", "invalid_request_error",
          "", "request_too_large"};
}

ApiError malformed_json_error(std::string_view what) {
  return {400, "request body is not valid JSON: " + std::string(what), "invalid_request_error", "",
          "invalid_json"};
}

ApiError invalid_utf8_error(size_t offset) {
  return {400, "request body is not valid UTF-8 (byte " + std::to_string(offset) + ")",
          "invalid_request_error", "", "invalid_utf8"};
}

}  // namespace deepinfer::server

// Checks on a request's head that need no engine: the API key, the Host header (DNS-rebinding
// protection when no key is set), the body's media type and the target's length. Pure functions
// of strings, so the HTTP fuzzer and unit tests call them exactly as the session does.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "deepinfer/server/http_server.h"
#include "deepinfer/server/protocol.h"

namespace deepinfer::server {

// Equal length and bytes, in time that depends only on the lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

// `values`: every Authorization header of the request. One `Bearer KEY` (scheme in any case)
// with the right key passes; none or a wrong key is 401, more than one header 400.
std::optional<ApiError> check_authorization(std::span<const std::string_view> values,
                                            std::string_view api_key);

// Without an API key a loopback server is reachable from any web page through DNS rebinding; the
// browser then sends the attacker's host name. Accepted: an IP literal, `localhost`, a name in
// `allowed` ("*" allows any). `values` are the Host headers: exactly one is required (400).
std::optional<ApiError> check_host(std::span<const std::string_view> values,
                                   std::span<const std::string> allowed);

// A request body must be JSON: no Content-Type, `application/json` or `application/*+json`
// (parameters such as charset allowed); anything else is 415.
std::optional<ApiError> check_content_type(std::span<const std::string_view> values);

}  // namespace deepinfer::server

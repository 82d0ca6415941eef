#include "deepinfer/server/request_checks.h"

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <cctype>

namespace deepinfer::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The host part of a Host header: "[::1]:8000" -> "::1", "example.com:80" -> "example.com".
std::string_view host_name(std::string_view h) {
  if (!h.empty() && h.front() == '[') {
    size_t end = h.find(']');
    return end == std::string_view::npos ? h : h.substr(1, end - 1);
  }
  size_t colon = h.rfind(':');
  return colon == std::string_view::npos ? h : h.substr(0, colon);
}

bool is_ip_literal(std::string_view h) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(std::string(h), ec);
  return !ec;
}

}  // namespace

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  return diff == 0;
}

std::optional<ApiError> check_authorization(std::span<const std::string_view> values,
                                            std::string_view api_key) {
  if (values.size() > 1)
    return ApiError{400, "more than one Authorization header", "invalid_request_error", "",
                    "duplicate_authorization"};
  if (values.empty()) return unauthorized_error();
  std::string_view v = trim(values[0]);
  constexpr std::string_view kScheme = "bearer";
  if (v.size() <= kScheme.size() || lower(v.substr(0, kScheme.size())) != kScheme ||
      (v[kScheme.size()] != ' ' && v[kScheme.size()] != '\t'))
    return unauthorized_error();
  if (!constant_time_equal(trim(v.substr(kScheme.size())), api_key)) return unauthorized_error();
  return std::nullopt;
}

std::optional<ApiError> check_host(std::span<const std::string_view> values,
                                   std::span<const std::string> allowed) {
  if (values.size() != 1)
    return ApiError{400, "a request needs exactly one Host header", "invalid_request_error", "",
                    "invalid_host"};
  const std::string name = lower(host_name(trim(values[0])));
  if (name == "localhost" || is_ip_literal(name)) return std::nullopt;
  for (const std::string& a : allowed)
    if (a == "*" || lower(a) == name) return std::nullopt;
  return ApiError{403,
                  "Host '" + name +
                      "' is not allowed (without --api-key only IP addresses, localhost and "
                      "--allowed-hosts are; this blocks DNS rebinding)",
                  "invalid_request_error", "", "host_not_allowed"};
}

std::optional<ApiError> check_content_type(std::span<const std::string_view> values) {
  if (values.empty()) return std::nullopt;
  std::string_view v = values[0];
  std::string type = lower(trim(v.substr(0, v.find(';'))));
  auto ends_with = [&](std::string_view suffix) {
    return type.size() >= suffix.size() &&
           type.compare(type.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (values.size() == 1 &&
      (type == "application/json" || (type.rfind("application/", 0) == 0 && ends_with("+json"))))
    return std::nullopt;
  return ApiError{415,
                  "Content-Type '" + std::string(v) + "' is not supported; send application/json",
                  "invalid_request_error", "", "unsupported_media_type"};
}

}  // namespace deepinfer::server

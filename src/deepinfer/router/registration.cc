#include "deepinfer/router/registration.h"

#include <nlohmann/json.hpp>

namespace deepinfer::router {

StatusOr<Registration> parse_registration(std::string_view body, bool leave) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) return invalid_argument("the body must be a JSON object");
  Registration r;
  if (!j.contains("url") || !j["url"].is_string())
    return invalid_argument("'url': a string http://host:port is required");
  auto url = parse_worker_url(j["url"].get<std::string>());
  if (!url.ok()) return invalid_argument("'url': " + url.status().message());
  r.url = *url;
  if (leave) return r;
  if (j.contains("role")) {
    if (!j["role"].is_string()) return invalid_argument("'role': one of prefill, decode, both");
    r.role = j["role"].get<std::string>();
    if (r.role != "prefill" && r.role != "decode" && r.role != "both")
      return invalid_argument("'role' '" + r.role + "': one of prefill, decode, both");
  }
  if (j.contains("ttl_s")) {
    if (!j["ttl_s"].is_number() || !(j["ttl_s"].get<double>() > 0) ||
        j["ttl_s"].get<double>() > 3600)
      return invalid_argument("'ttl_s': a number of seconds in (0, 3600]");
    r.ttl_s = j["ttl_s"].get<double>();
  }
  return r;
}

}  // namespace deepinfer::router

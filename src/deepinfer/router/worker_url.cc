#include "deepinfer/router/worker_url.h"

#include <cstdlib>

namespace deepinfer::router {

StatusOr<WorkerUrl> parse_worker_url(const std::string& url) {
  auto bad = [&](const std::string& why) {
    return invalid_argument("worker URL '" + url + "': " + why);
  };
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return bad("must start with http:// (no TLS to workers)");
  std::string rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos) return bad("no path after host:port");
  WorkerUrl out;
  out.text = scheme + rest;
  size_t colon = rest.rfind(':');
  // [v6]:port keeps its brackets out of the host.
  if (!rest.empty() && rest[0] == '[') {
    size_t close = rest.find(']');
    if (close == std::string::npos) return bad("unclosed '[' in the host");
    out.host = rest.substr(1, close - 1);
    colon = close + 1 < rest.size() && rest[close + 1] == ':' ? close + 1 : std::string::npos;
  } else {
    out.host = rest.substr(0, colon);
  }
  if (out.host.empty()) return bad("no host");
  if (colon != std::string::npos) {
    std::string port = rest.substr(colon + 1);
    char* end = nullptr;
    long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 65535) return bad("port must be 1-65535");
    out.port = static_cast<int>(p);
  }
  return out;
}

}  // namespace deepinfer::router

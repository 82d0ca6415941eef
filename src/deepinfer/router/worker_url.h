// A worker's address as given to --worker: http://host:port (a trailing '/' is allowed).
#pragma once

#include <string>

#include "deepinfer/base/status.h"

namespace deepinfer::router {

struct WorkerUrl {
  std::string host;
  int port = 80;
  std::string text;  // as given, less a trailing '/': the `worker` label in /metrics
};

// Errors name the URL and what is wrong with it.
StatusOr<WorkerUrl> parse_worker_url(const std::string& url);

}  // namespace deepinfer::router

// Worker self-registration: POST /router/workers {"url", "role", "ttl_s"} joins or heartbeats,
// POST /router/workers/leave {"url"} leaves. Parsing is pure; applying touches the pools.
#pragma once

#include <string>
#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/router/worker_pool.h"
#include "deepinfer/router/worker_url.h"

namespace deepinfer::router {

struct Registration {
  WorkerUrl url;
  std::string role = "both";  // prefill, decode or both
  double ttl_s = 6;           // default when the body has none
};

// leave: only "url" is read. Errors name the field ("'role': one of prefill, decode, both").
StatusOr<Registration> parse_registration(std::string_view body, bool leave);

}  // namespace deepinfer::router

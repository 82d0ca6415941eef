// `deepinfer serve --register-with ROUTER_URL`: the worker joins a router's pool by itself. A
// thread POSTs {"url", "role", "ttl_s"} to ROUTER_URL/router/workers every interval (the
// heartbeat: the router drops a worker it has not heard from for ttl_s), and leave() POSTs
// {"url"} to ROUTER_URL/router/workers/leave, as draining starts. Every call is bounded by
// timeout_s; a router that is down costs one log line, and the heartbeats go on.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "deepinfer/base/status.h"

namespace deepinfer::server {

struct RegistrationOptions {
  std::string router_url;  // --register-with: http://host:port
  std::string worker_url;  // --advertise-url: the base URL the router reaches this worker at
  std::string role = "both";
  double interval_s = 2, ttl_s = 6, timeout_s = 2;
};

// http://host:port[/] into its parts; invalid_argument naming `flag` otherwise.
struct HttpAddress {
  std::string host;
  int port = 0;
};
StatusOr<HttpAddress> parse_http_url(const std::string& url, const std::string& flag);

// One bounded HTTP/1.1 POST of a JSON body; the response's status code.
StatusOr<int> post_json(const HttpAddress& at, const std::string& path, const std::string& body,
                        double timeout_s);

class WorkerRegistration {
 public:
  static StatusOr<std::unique_ptr<WorkerRegistration>> start(RegistrationOptions o);
  ~WorkerRegistration();  // leave()s if it has not yet
  // Stops the heartbeats and tells the router (once).
  void leave();
  int64_t heartbeats_acknowledged() const { return acked_; }

 private:
  WorkerRegistration(RegistrationOptions o, HttpAddress router);
  void loop();
  std::string beat();  // empty: acknowledged; else what went wrong

  RegistrationOptions o_;
  HttpAddress router_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool left_ = false;
  std::atomic<int64_t> acked_{0};
  std::thread thread_;
};

}  // namespace deepinfer::server

// The workers as the router sees them: health, load and counters. Lives on the router's io
// thread alone, so nothing here locks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/router/policy.h"
#include "deepinfer/router/worker_url.h"

namespace deepinfer::router {

struct WorkerState {
  WorkerUrl url;
  bool healthy = true;  // until a check or a refused connection says otherwise
  bool check_in_flight = false;
  int failed_checks = 0;  // consecutive
  int64_t outstanding = 0;
  uint64_t requests = 0;  // attempts sent to it, retries included
  uint64_t failures = 0;  // attempts that failed: no connection, no answer, cut mid-response
  uint64_t ejections = 0;
  uint64_t cache_hits = 0;  // cache_aware picks made for the prefix it had served
};

class WorkerPool {
 public:
  // A worker is ejected after this many consecutive failed health checks (or at once when a
  // connection to it is refused) and readmitted by one passing check.
  static constexpr int kFailedChecksToEject = 2;

  WorkerPool(std::vector<WorkerUrl> urls, Policy* policy);
  size_t size() const { return workers_.size(); }
  WorkerState& operator[](size_t i) { return workers_[i]; }
  const WorkerState& operator[](size_t i) const { return workers_[i]; }
  size_t num_healthy() const;

  // Loads for a policy: available = healthy and not in `tried`.
  std::vector<WorkerLoad> loads(const std::vector<bool>& tried) const;
  void eject(size_t i, const std::string& why);
  void record_check(size_t i, bool ok, const std::string& why);

 private:
  std::vector<WorkerState> workers_;
  Policy* policy_;  // told to forget an ejected worker's prefixes
};

// Prometheus text: per worker requests, failures, ejections, outstanding, health and
// cache_aware hits; the router's retries and requests in flight.
std::string render_router_metrics(const WorkerPool& pool, uint64_t retries, int64_t in_flight);

}  // namespace deepinfer::router

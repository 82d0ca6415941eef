// The router's own counters and its Prometheus text (GET /metrics).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "deepinfer/router/worker_pool.h"

namespace deepinfer::router {

// Exact quantiles over the latest kCapacity samples (a ring).
class LatencySamples {
 public:
  static constexpr size_t kCapacity = 1 << 16;
  void add(double seconds);
  double quantile(double q) const;  // nearest rank over the kept samples; 0 when none
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> ring_;
  size_t next_ = 0;
  uint64_t count_ = 0;
  double sum_ = 0;
};

struct RouterCounters {
  uint64_t retries = 0;      // attempts (or PD pairs) sent again after a failure
  uint64_t client_gone = 0;  // clients that left before their answer: the worker's call closed
  int64_t in_flight = 0;
  uint64_t pd_pairs = 0;              // PD: phase 1 sent to a prefill worker
  uint64_t pd_plain_no_handoff = 0;   // phase 1 answered handoff null: plain to the decode worker
  uint64_t pd_plain_same_worker = 0;  // the pair was one `both` worker: plain, no transfer
  uint64_t pd_transfer_failures = 0;  // phase 2 answered 502 kv_transfer_failed
  // Time to the client's first byte less the time spent waiting for workers' answers: parsing,
  // routing, connecting, relaying and the io thread's queue (see README).
  LatencySamples added_latency;
};

std::string render_router_metrics(std::span<const WorkerPool* const> pools,
                                  const RouterCounters& counters);

}  // namespace deepinfer::router

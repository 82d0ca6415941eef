// One list of workers as the router sees them (data-parallel workers, or PD's prefill or decode
// side): health, load, registration and counters, and the policy that picks among them. Lives on
// the router's io thread alone, so nothing here locks.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/router/policy.h"
#include "deepinfer/router/worker_url.h"

namespace deepinfer::router {

using Clock = std::chrono::steady_clock;

struct WorkerState {
  WorkerUrl url;
  bool registered = false;      // joined by POST /router/workers (else from the command line)
  bool present = true;          // from the command line, or registered and neither left nor expired
  Clock::time_point expires{};  // registered: the heartbeat must come before this
  bool healthy = true;          // until a check or a refused connection says otherwise
  bool check_in_flight = false;
  int failed_checks = 0;  // consecutive
  int64_t outstanding = 0;
  int64_t pending_prefill_tokens = 0;  // PD phase 1 requests at it: routing bytes / 4
  WorkerLoad load;                     // the /load fields of its latest poll
  uint64_t requests = 0;               // attempts sent to it, retries included
  uint64_t failures = 0;  // attempts that failed: no connection, no answer, cut mid-response
  uint64_t ejections = 0;
  uint64_t picks = 0;           // times the policy chose it
  uint64_t cache_hits = 0;      // cache_aware picks made for the prefix it had served
  double first_byte_s_sum = 0;  // request sent -> response head, over first_byte_count answers
  uint64_t first_byte_count = 0;
};

class WorkerPool {
 public:
  // A worker is ejected after this many consecutive failed health checks (or at once when a
  // connection to it is refused) and readmitted by one passing check.
  static constexpr int kFailedChecksToEject = 2;

  // name: "worker" (data-parallel), "prefill" or "decode"; the `pool` label in /metrics.
  WorkerPool(std::string name, std::vector<WorkerUrl> urls, std::unique_ptr<Policy> policy);
  const std::string& name() const { return name_; }
  // Indices are stable: a worker that leaves keeps its slot (present = false) and a worker that
  // registers again takes it back. A deque, so references held across co_await stay valid.
  size_t size() const { return workers_.size(); }
  WorkerState& operator[](size_t i) { return workers_[i]; }
  const WorkerState& operator[](size_t i) const { return workers_[i]; }
  size_t num_healthy() const;  // present and healthy
  std::optional<size_t> find(const WorkerUrl& url) const;

  // The policy's pick among the available workers (present, healthy, not in `tried`; a worker
  // newer than `tried` counts as untried); counts the pick and a cache hit.
  std::optional<Pick> pick(std::string_view text, const std::vector<bool>& tried);
  std::vector<WorkerLoad> loads(const std::vector<bool>& tried) const;
  void eject(size_t i, const std::string& why);
  void record_check(size_t i, bool ok, const std::string& why);

  // Registration: a worker joins (or heartbeats) with a time to live; a static worker is left as
  // it is. Returns whether it (re)joined rather than only heartbeating.
  bool join(const WorkerUrl& url, double ttl_s, Clock::time_point now);
  // It says it is leaving: a registered worker is dropped, a static one ejected (its health
  // checks readmit it when it is back). Returns whether the URL was in the pool.
  bool leave(const WorkerUrl& url);
  // Registered workers whose heartbeat is past due are dropped; returns how many.
  size_t expire(Clock::time_point now);

  uint64_t joins = 0, leaves = 0, expiries = 0;

 private:
  void drop(size_t i, const char* why);

  std::string name_;
  std::deque<WorkerState> workers_;
  std::unique_ptr<Policy> policy_;  // also told to forget a departed worker's prefixes
};

}  // namespace deepinfer::router

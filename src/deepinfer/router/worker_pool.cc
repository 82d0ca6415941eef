#include "deepinfer/router/worker_pool.h"

#include <cstdio>

namespace deepinfer::router {

namespace {

// "worker URL" (data-parallel) or "prefill worker URL".
std::string who(const std::string& pool, const WorkerState& w) {
  return (pool == "worker" ? "" : pool + " ") + "worker " + w.url.text;
}

}  // namespace

WorkerPool::WorkerPool(std::string name, std::vector<WorkerUrl> urls,
                       std::unique_ptr<Policy> policy)
    : name_(std::move(name)), policy_(std::move(policy)) {
  for (auto& u : urls) {
    workers_.emplace_back();
    workers_.back().url = std::move(u);
  }
}

size_t WorkerPool::num_healthy() const {
  size_t n = 0;
  for (const auto& w : workers_) n += w.present && w.healthy;
  return n;
}

std::optional<size_t> WorkerPool::find(const WorkerUrl& url) const {
  for (size_t i = 0; i < workers_.size(); ++i)
    if (workers_[i].url.host == url.host && workers_[i].url.port == url.port) return i;
  return std::nullopt;
}

std::vector<WorkerLoad> WorkerPool::loads(const std::vector<bool>& tried) const {
  std::vector<WorkerLoad> out(workers_.size());
  for (size_t i = 0; i < workers_.size(); ++i) {
    const WorkerState& w = workers_[i];
    out[i] = w.load;
    out[i].available = w.present && w.healthy && !(i < tried.size() && tried[i]);
    out[i].outstanding = w.outstanding;
    out[i].pending_prefill_tokens = w.pending_prefill_tokens;
  }
  return out;
}

std::optional<Pick> WorkerPool::pick(std::string_view text, const std::vector<bool>& tried) {
  auto got = policy_->pick(text, loads(tried));
  if (got) {
    ++workers_[got->worker].picks;
    if (got->cache_hit) ++workers_[got->worker].cache_hits;
  }
  return got;
}

void WorkerPool::eject(size_t i, const std::string& why) {
  WorkerState& w = workers_[i];
  if (!w.healthy) return;
  w.healthy = false;
  ++w.ejections;
  policy_->forget(i);  // it may come back restarted, with an empty cache
  std::fprintf(stderr, "deepinfer router: ejected %s: %s\n", who(name_, w).c_str(), why.c_str());
}

void WorkerPool::record_check(size_t i, bool ok, const std::string& why) {
  WorkerState& w = workers_[i];
  if (ok) {
    w.failed_checks = 0;
    if (!w.healthy) {
      w.healthy = true;
      std::fprintf(stderr, "deepinfer router: readmitted %s\n", who(name_, w).c_str());
    }
    return;
  }
  if (++w.failed_checks >= kFailedChecksToEject) eject(i, "health check: " + why);
}

bool WorkerPool::join(const WorkerUrl& url, double ttl_s, Clock::time_point now) {
  auto deadline =
      now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(ttl_s));
  auto at = find(url);
  if (at && !workers_[*at].registered) return false;  // static: health checks decide
  if (at && workers_[*at].present) {
    workers_[*at].expires = deadline;
    return false;
  }
  if (!at) {
    workers_.emplace_back();
    workers_.back().url = url;
    at = workers_.size() - 1;
  }
  WorkerState& w = workers_[*at];
  w.registered = true;
  w.present = true;
  w.expires = deadline;
  // It announced itself just now: in rotation until a check says otherwise.
  w.healthy = true;
  w.failed_checks = 0;
  w.load = WorkerLoad{};
  ++joins;
  std::fprintf(stderr, "deepinfer router: %s registered (ttl %.1f s)\n", who(name_, w).c_str(),
               ttl_s);
  return true;
}

void WorkerPool::drop(size_t i, const char* why) {
  WorkerState& w = workers_[i];
  w.present = false;
  w.load = WorkerLoad{};
  policy_->forget(i);
  std::fprintf(stderr, "deepinfer router: %s %s\n", who(name_, w).c_str(), why);
}

bool WorkerPool::leave(const WorkerUrl& url) {
  auto at = find(url);
  if (!at) return false;
  if (!workers_[*at].registered) {
    eject(*at, "it said it is leaving");
    return true;
  }
  if (!workers_[*at].present) return true;
  ++leaves;
  drop(*at, "left");
  return true;
}

size_t WorkerPool::expire(Clock::time_point now) {
  size_t n = 0;
  for (size_t i = 0; i < workers_.size(); ++i) {
    WorkerState& w = workers_[i];
    if (!w.registered || !w.present || now < w.expires) continue;
    ++expiries;
    ++n;
    drop(i, "expired (no heartbeat within its ttl)");
  }
  return n;
}

}  // namespace deepinfer::router

#include "deepinfer/router/worker_pool.h"

#include <cstdio>
#include <functional>

namespace deepinfer::router {

WorkerPool::WorkerPool(std::vector<WorkerUrl> urls, Policy* policy) : policy_(policy) {
  for (auto& u : urls) workers_.push_back(WorkerState{std::move(u)});
}

size_t WorkerPool::num_healthy() const {
  size_t n = 0;
  for (const auto& w : workers_) n += w.healthy;
  return n;
}

std::vector<WorkerLoad> WorkerPool::loads(const std::vector<bool>& tried) const {
  std::vector<WorkerLoad> out(workers_.size());
  for (size_t i = 0; i < workers_.size(); ++i)
    out[i] = {workers_[i].healthy && !tried[i], workers_[i].outstanding};
  return out;
}

void WorkerPool::eject(size_t i, const std::string& why) {
  WorkerState& w = workers_[i];
  if (!w.healthy) return;
  w.healthy = false;
  ++w.ejections;
  policy_->forget(i);  // it may come back restarted, with an empty cache
  std::fprintf(stderr, "deepinfer router: ejected worker %s: %s\n", w.url.text.c_str(),
               why.c_str());
}

void WorkerPool::record_check(size_t i, bool ok, const std::string& why) {
  WorkerState& w = workers_[i];
  if (ok) {
    w.failed_checks = 0;
    if (!w.healthy) {
      w.healthy = true;
      std::fprintf(stderr, "deepinfer router: readmitted worker %s\n", w.url.text.c_str());
    }
    return;
  }
  if (++w.failed_checks >= kFailedChecksToEject) eject(i, "health check: " + why);
}

namespace {

std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string render_router_metrics(const WorkerPool& pool, uint64_t retries, int64_t in_flight) {
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help,
                    const std::function<double(const WorkerState&)>& value) {
    out += std::string("# HELP deepinfer_router:") + name + " " + help + "\n";
    out += std::string("# TYPE deepinfer_router:") + name + " " + type + "\n";
    for (size_t i = 0; i < pool.size(); ++i) {
      char num[32];
      std::snprintf(num, sizeof num, "%.17g", value(pool[i]));
      out += std::string("deepinfer_router:") + name + "{worker=\"" + label(pool[i].url.text) +
             "\"} " + num + "\n";
    }
  };
  family("worker_requests_total", "counter", "Attempts sent to the worker, retries included.",
         [](const WorkerState& w) { return static_cast<double>(w.requests); });
  family("worker_failures_total", "counter",
         "Attempts that failed: no connection, no answer in time, or cut mid-response.",
         [](const WorkerState& w) { return static_cast<double>(w.failures); });
  family("worker_ejections_total", "counter", "Times the worker was taken out of rotation.",
         [](const WorkerState& w) { return static_cast<double>(w.ejections); });
  family("worker_healthy", "gauge", "1 in rotation, 0 ejected.",
         [](const WorkerState& w) { return w.healthy ? 1.0 : 0.0; });
  family("worker_outstanding_requests", "gauge", "Requests sent to the worker and not finished.",
         [](const WorkerState& w) { return static_cast<double>(w.outstanding); });
  family("worker_cache_aware_hits_total", "counter",
         "cache_aware picks made for the prompt prefix the worker had served.",
         [](const WorkerState& w) { return static_cast<double>(w.cache_hits); });
  out += "# HELP deepinfer_router:retries_total Attempts sent to another worker after a failure.\n";
  out += "# TYPE deepinfer_router:retries_total counter\n";
  out += "deepinfer_router:retries_total " + std::to_string(retries) + "\n";
  out += "# HELP deepinfer_router:requests_in_flight Client requests being proxied.\n";
  out += "# TYPE deepinfer_router:requests_in_flight gauge\n";
  out += "deepinfer_router:requests_in_flight " + std::to_string(in_flight) + "\n";
  return out;
}

}  // namespace deepinfer::router

#include "deepinfer/router/router_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

namespace deepinfer::router {

void LatencySamples::add(double seconds) {
  if (ring_.size() < kCapacity) {
    ring_.push_back(seconds);
  } else {
    ring_[next_] = seconds;
    next_ = (next_ + 1) % kCapacity;
  }
  ++count_;
  sum_ += seconds;
}

double LatencySamples::quantile(double q) const {
  if (ring_.empty()) return 0;
  std::vector<double> v = ring_;
  // Nearest rank: the smallest sample with at least q of them at or below it.
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  size_t k = std::min(v.size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

namespace {

std::string escape(const std::string& v) {
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

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Data-parallel workers keep the one label they always had; PD's sides add `pool`.
std::string worker_labels(const WorkerPool& pool, const WorkerState& w) {
  std::string out = "{";
  if (pool.name() != "worker") out += "pool=\"" + pool.name() + "\",";
  return out + "worker=\"" + escape(w.url.text) + "\"}";
}

void head(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP deepinfer_router:") + name + " " + help + "\n";
  out += std::string("# TYPE deepinfer_router:") + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, const std::string& labels, double v) {
  out += "deepinfer_router:" + name + labels + " " + num(v) + "\n";
}

}  // namespace

std::string render_router_metrics(std::span<const WorkerPool* const> pools,
                                  const RouterCounters& c) {
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help,
                    const std::function<std::optional<double>(const WorkerState&)>& value) {
    head(out, name, type, help);
    for (const WorkerPool* pool : pools)
      for (size_t i = 0; i < pool->size(); ++i)
        if (auto v = value((*pool)[i])) sample(out, name, worker_labels(*pool, (*pool)[i]), *v);
  };
  using W = const WorkerState&;
  auto d = [](auto v) { return std::optional<double>(static_cast<double>(v)); };
  family("worker_requests_total", "counter", "Attempts sent to the worker, retries included.",
         [&](W w) { return d(w.requests); });
  family("worker_failures_total", "counter",
         "Attempts that failed: no connection, no answer in time, or cut mid-response.",
         [&](W w) { return d(w.failures); });
  family("worker_ejections_total", "counter", "Times the worker was taken out of rotation.",
         [&](W w) { return d(w.ejections); });
  family("worker_healthy", "gauge", "1 in rotation, 0 ejected.",
         [&](W w) { return d(w.healthy ? 1 : 0); });
  family("worker_registered", "gauge",
         "1 while the worker is listed (command line, or registered and heartbeating), 0 after it "
         "left or expired.",
         [&](W w) { return d(w.present ? 1 : 0); });
  family("worker_outstanding_requests", "gauge", "Requests sent to the worker and not finished.",
         [&](W w) { return d(w.outstanding); });
  family("worker_pending_prefill_tokens", "gauge",
         "PD prefill requests at the worker, in estimated prompt tokens (routing bytes / 4).",
         [&](W w) { return d(w.pending_prefill_tokens); });
  family("worker_picks_total", "counter", "Times the policy chose the worker.",
         [&](W w) { return d(w.picks); });
  family("worker_cache_aware_hits_total", "counter",
         "cache_aware picks made for the prompt prefix the worker had served.",
         [&](W w) { return d(w.cache_hits); });
  family("worker_cache_aware_hit_rate", "gauge", "cache_aware hits / picks (0 before a pick).",
         [&](W w) { return d(w.picks ? double(w.cache_hits) / double(w.picks) : 0.0); });
  family("worker_first_byte_seconds_sum", "counter",
         "Queue time: from the request sent to the worker's response head, summed.",
         [&](W w) { return d(w.first_byte_s_sum); });
  family("worker_first_byte_seconds_count", "counter", "Response heads timed.",
         [&](W w) { return d(w.first_byte_count); });
  auto known = [](W w, double v) {
    return w.load.load_known ? std::optional<double>(v) : std::nullopt;
  };
  family("worker_kv_usage", "gauge", "The worker's GET /load kv_usage (latest poll).",
         [&](W w) { return known(w, w.load.kv_usage); });
  family("worker_num_running", "gauge", "The worker's GET /load num_running (latest poll).",
         [&](W w) { return known(w, double(w.load.num_running)); });
  family("worker_num_waiting", "gauge", "The worker's GET /load num_waiting (latest poll).",
         [&](W w) { return known(w, double(w.load.num_waiting)); });

  auto pool_family = [&](const char* name, const char* help, auto value) {
    head(out, name, "counter", help);
    for (const WorkerPool* pool : pools)
      sample(out, name, "{pool=\"" + pool->name() + "\"}", double(value(*pool)));
  };
  pool_family("workers_joined_total", "Registrations that added a worker (or brought one back).",
              [](const WorkerPool& p) { return p.joins; });
  pool_family("workers_left_total", "Registered workers that said they are leaving.",
              [](const WorkerPool& p) { return p.leaves; });
  pool_family("workers_expired_total", "Registered workers dropped for a missed heartbeat.",
              [](const WorkerPool& p) { return p.expiries; });

  auto scalar = [&](const char* name, const char* type, const char* help, double v) {
    head(out, name, type, help);
    sample(out, name, "", v);
  };
  scalar("retries_total", "counter", "Attempts sent to another worker after a failure.",
         double(c.retries));
  scalar("client_gone_total", "counter",
         "Requests whose client left before the answer: the worker's call was closed, which "
         "cancels it there, and nothing was retried.",
         double(c.client_gone));
  scalar("requests_in_flight", "gauge", "Client requests being proxied.", double(c.in_flight));
  scalar("pd_pairs_total", "counter", "PD: phase 1 requests sent to a prefill worker.",
         double(c.pd_pairs));
  head(out, "pd_plain_total", "counter",
       "PD requests sent plain to the decode worker: handoff null, or one worker on both sides.");
  sample(out, "pd_plain_total", "{reason=\"no_handoff\"}", double(c.pd_plain_no_handoff));
  sample(out, "pd_plain_total", "{reason=\"same_worker\"}", double(c.pd_plain_same_worker));
  scalar("pd_transfer_failures_total", "counter",
         "PD: decode workers that answered kv_transfer_failed (the pair was retried).",
         double(c.pd_transfer_failures));
  head(out, "added_latency_seconds", "summary",
       "Time to the client's first byte less the time waiting on workers' answers.");
  for (auto [q, label] : {std::pair{0.5, "0.5"}, {0.9, "0.9"}, {0.99, "0.99"}})
    sample(out, "added_latency_seconds", std::string("{quantile=\"") + label + "\"}",
           c.added_latency.quantile(q));
  sample(out, "added_latency_seconds_sum", "", c.added_latency.sum());
  sample(out, "added_latency_seconds_count", "", double(c.added_latency.count()));
  return out;
}

}  // namespace deepinfer::router

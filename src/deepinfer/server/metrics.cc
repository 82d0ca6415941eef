#include "deepinfer/server/metrics.h"

#include <cstdio>

namespace deepinfer::server {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

void header(std::string* out, const std::string& name, const char* type, const char* help) {
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string* out, const std::string& name, const std::string& labels, double v) {
  *out += name + "{" + labels + "} " + num(v) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& labels, std::string* out) const {
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    std::string le = i < bounds_.size() ? num(bounds_[i]) : "+Inf";
    sample(out, name + "_bucket", labels + ",le=\"" + le + "\"", static_cast<double>(cum));
  }
  sample(out, name + "_sum", labels, sum_);
  sample(out, name + "_count", labels, static_cast<double>(count_));
}

// Bucket bounds are vLLM's, so dashboards built for it read these the same way.
Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
             1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}),
      itl_({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
            20.0, 40.0, 80.0}),
      e2e_({0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
            30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}) {
  for (const char* r : {"stop", "length", "abort"}) finished_[r] = 0;
}

void Metrics::on_finished(const std::string& reason, double e2e_s, int64_t prompt_tokens,
                          int64_t generation_tokens) {
  ++finished_[reason];
  e2e_.observe(e2e_s);
  prompt_tokens_ += prompt_tokens;
  generation_tokens_ += generation_tokens;
}

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
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

// vLLM's two prefix cache counters, then per-tier figures of deepinfer's cache tiers.
void render_prefix_cache(const std::string& l, const PrefixCacheStats& c, std::string* out) {
  static const char* kTiers[] = {"device", "host", "disk", "cluster"};
  int64_t hits = 0;
  for (int64_t h : c.hit_tokens) hits += h;
  std::string n = "deepinfer:prefix_cache_queries_total";
  header(out, n, "counter", "Prefix cache queries, in terms of number of queried tokens.");
  sample(out, n, l, static_cast<double>(c.queried_tokens));
  n = "deepinfer:prefix_cache_hits_total";
  header(out, n, "counter", "Prefix cache hits, in terms of number of cached tokens.");
  sample(out, n, l, static_cast<double>(hits));
  struct PerTier {
    const char* name;
    const char* type;
    const char* help;
    const std::array<int64_t, 4>* v;
  };
  const PerTier per_tier[] = {
      {"deepinfer:prefix_cache_tier_hit_tokens_total", "counter",
       "Prefix cache hit tokens by the tier the units were found in.", &c.hit_tokens},
      {"deepinfer:prefix_cache_tier_units", "gauge", "Prefix cache units held per tier.", &c.units},
      {"deepinfer:prefix_cache_tier_bytes", "gauge", "Prefix cache bytes held per tier.", &c.bytes},
      {"deepinfer:prefix_cache_tier_bytes_written_total", "counter",
       "Bytes stored into each tier below the device.", &c.bytes_written},
      {"deepinfer:prefix_cache_tier_bytes_read_total", "counter",
       "Bytes read back from each tier below the device.", &c.bytes_read},
  };
  for (const PerTier& t : per_tier) {
    header(out, t.name, t.type, t.help);
    for (int i = 0; i < 4; ++i)
      sample(out, t.name, l + ",tier=\"" + kTiers[i] + "\"", static_cast<double>((*t.v)[i]));
  }
  n = "deepinfer:prefix_cache_evictions_total";
  header(out, n, "counter", "Prefix cache units evicted, by tier and cause (capacity, expired).");
  for (int i = 0; i < 4; ++i) {
    const std::string tl = l + ",tier=\"" + kTiers[i] + "\"";
    sample(out, n, tl + ",cause=\"capacity\"", static_cast<double>(c.evicted_capacity[i]));
    sample(out, n, tl + ",cause=\"expired\"", static_cast<double>(c.evicted_expired[i]));
  }
  n = "deepinfer:prefix_cache_corrupt_units_total";
  header(out, n, "counter", "Stored units that failed verification and were recomputed.");
  sample(out, n, l, static_cast<double>(c.corrupt_dropped));
  n = "deepinfer:prefix_cache_write_errors_total";
  header(out, n, "counter", "Failed or dropped writes to the disk and cluster tiers.");
  sample(out, n, l, static_cast<double>(c.write_errors + c.writes_dropped));
  n = "deepinfer:prefix_cache_load_seconds";
  header(out, n, "summary", "Time to bring a prefix up from a lower tier into device pages.");
  sample(out, n + "_sum", l, c.load_seconds);
  sample(out, n + "_count", l, static_cast<double>(c.loads));
}

std::string render_spec_decode(const std::string& l, const EngineStats& st) {
  std::string out;
  std::string n = "deepinfer:spec_decode_num_drafts_total";
  header(&out, n, "counter", "Speculative verifications (one per sequence step with drafts).");
  sample(&out, n, l, static_cast<double>(st.spec_verifications));
  n = "deepinfer:spec_decode_num_draft_tokens_total";
  header(&out, n, "counter", "Draft tokens verified.");
  sample(&out, n, l, static_cast<double>(st.spec_draft_tokens));
  n = "deepinfer:spec_decode_num_accepted_tokens_total";
  header(&out, n, "counter", "Draft tokens accepted (they became output tokens).");
  sample(&out, n, l, static_cast<double>(st.spec_accepted_tokens));
  n = "deepinfer:spec_decode_num_accepted_tokens_per_pos_total";
  header(&out, n, "counter", "Accepted draft tokens by draft position (0-based).");
  for (size_t i = 0; i < st.spec_accepted_at.size(); ++i)
    sample(&out, n, l + ",position=\"" + std::to_string(i) + "\"",
           static_cast<double>(st.spec_accepted_at[i]));
  return out;
}

std::string Metrics::render(const std::string& model_name, const Engine* engine) const {
  const std::string l = "model_name=\"" + escape_label_value(model_name) + "\"";
  std::string out;
  EngineStats st;
  double kv_usage = 0;
  if (engine != nullptr) {
    st = engine->stats();
    const int64_t pages = engine->capacity().num_pages;
    if (pages > 0) kv_usage = 1.0 - static_cast<double>(engine->kv_free_pages()) / pages;
  }
  std::string n = "deepinfer:num_requests_running";
  header(&out, n, "gauge", "Number of sequences in model execution batches.");
  sample(&out, n, l, static_cast<double>(st.num_running));
  n = "deepinfer:num_requests_waiting";
  header(&out, n, "gauge", "Number of sequences waiting to be processed.");
  sample(&out, n, l, static_cast<double>(st.num_waiting));
  n = "deepinfer:kv_cache_usage_perc";
  header(&out, n, "gauge", "KV-cache usage. 1 means 100 percent usage.");
  sample(&out, n, l, kv_usage);
  render_prefix_cache(l, engine ? engine->prefix_cache_stats() : PrefixCacheStats(), &out);
  n = "deepinfer:num_preemptions_total";
  header(&out, n, "counter", "Cumulative number of preemptions from the engine.");
  sample(&out, n, l, static_cast<double>(st.preemptions));
  out += render_spec_decode(l, st);
  n = "deepinfer:prompt_tokens_total";
  header(&out, n, "counter", "Number of prefill tokens processed.");
  sample(&out, n, l, static_cast<double>(prompt_tokens_));
  n = "deepinfer:generation_tokens_total";
  header(&out, n, "counter", "Number of generation tokens processed.");
  sample(&out, n, l, static_cast<double>(generation_tokens_));
  n = "deepinfer:request_success_total";
  header(&out, n, "counter", "Count of finished requests, by finish reason (abort: aborted).");
  for (const auto& [reason, count] : finished_)
    sample(&out, n, l + ",finished_reason=\"" + reason + "\"", static_cast<double>(count));
  n = "deepinfer:http_requests_in_flight";
  header(&out, n, "gauge", "Requests the HTTP server has submitted and not yet seen finish.");
  sample(&out, n, l, static_cast<double>(in_flight));
  n = "deepinfer:http_responses_in_progress";
  header(&out, n, "gauge", "Requests read whose response is not fully written (this scrape too).");
  sample(&out, n, l, static_cast<double>(busy));
  n = "deepinfer:http_responses_total";
  header(&out, n, "counter", "HTTP responses by status code.");
  for (const auto& [status, count] : http_status_)
    sample(&out, n, l + ",status=\"" + std::to_string(status) + "\"", static_cast<double>(count));
  n = "deepinfer:time_to_first_token_seconds";
  header(&out, n, "histogram", "Histogram of time to first token in seconds.");
  ttft_.render(n, l, &out);
  n = "deepinfer:inter_token_latency_seconds";
  header(&out, n, "histogram", "Histogram of inter-token latency in seconds.");
  itl_.render(n, l, &out);
  n = "deepinfer:e2e_request_latency_seconds";
  header(&out, n, "histogram", "Histogram of end to end request latency in seconds.");
  e2e_.render(n, l, &out);
  return out;
}

}  // namespace deepinfer::server

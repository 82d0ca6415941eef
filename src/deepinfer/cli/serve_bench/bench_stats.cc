#include "deepinfer/cli/serve_bench/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace deepinfer::cli::serve_bench {

StatusOr<Slo> parse_goodput(const std::vector<std::string>& items) {
  Slo slo;
  for (const std::string& it : items) {
    const size_t colon = it.find(':');
    const std::string key = it.substr(0, colon);
    const std::string value = colon == std::string::npos ? "" : it.substr(colon + 1);
    char* end = nullptr;
    const double ms = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(ms > 0))
      return invalid_argument("--goodput '" + it +
                              "': expected KEY:MILLISECONDS with a positive "
                              "number (keys ttft, tpot, e2el)");
    if (key == "ttft") {
      slo.ttft_ms = ms;
    } else if (key == "tpot") {
      slo.tpot_ms = ms;
    } else if (key == "e2el") {
      slo.e2el_ms = ms;
    } else {
      return invalid_argument("--goodput '" + it + "': unknown key '" + key +
                              "' (one of ttft, tpot, e2el)");
    }
  }
  return slo;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * double(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - double(lo));
}

double tpot_s(const RequestRecord& r) {
  return r.output_tokens > 1 ? (r.e2el_s - r.ttft_s) / double(r.output_tokens - 1) : 0.0;
}

Distribution distribution(const std::vector<double>& values, const std::vector<double>& ps) {
  Distribution d;
  if (values.empty()) {
    for (double p : ps) d.percentiles[p] = 0;
    return d;
  }
  double sum = 0;
  for (double x : values) sum += x;
  d.mean = sum / double(values.size());
  double sq = 0;
  for (double x : values) sq += (x - d.mean) * (x - d.mean);
  d.std = std::sqrt(sq / double(values.size()));
  for (double p : ps) d.percentiles[p] = percentile(values, p);
  return d;
}

Summary summarize(const std::vector<RequestRecord>& records, double duration_s, const Slo& slo,
                  const std::vector<double>& ps) {
  Summary s;
  s.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2el;
  int64_t good = 0;
  for (const RequestRecord& r : records) {
    if (!r.ok) {
      ++s.failed;
      if (s.first_error.empty()) s.first_error = r.error;
      continue;
    }
    ++s.completed;
    s.input_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    s.cached_tokens += r.cached_tokens;
    ttft.push_back(1e3 * r.ttft_s);
    e2el.push_back(1e3 * r.e2el_s);
    if (r.output_tokens > 1) tpot.push_back(1e3 * tpot_s(r));
    for (double g : r.itl_s) itl.push_back(1e3 * g);
    const bool meets = (!slo.ttft_ms || 1e3 * r.ttft_s <= *slo.ttft_ms) &&
                       (!slo.tpot_ms || 1e3 * tpot_s(r) <= *slo.tpot_ms) &&
                       (!slo.e2el_ms || 1e3 * r.e2el_s <= *slo.e2el_ms);
    good += meets;
  }
  if (duration_s > 0) {
    s.request_throughput = double(s.completed) / duration_s;
    s.output_throughput = double(s.output_tokens) / duration_s;
    s.total_throughput = double(s.input_tokens + s.output_tokens) / duration_s;
    if (!slo.empty()) s.goodput = double(good) / duration_s;
  }
  s.ttft_ms = distribution(ttft, ps);
  s.tpot_ms = distribution(tpot, ps);
  s.itl_ms = distribution(itl, ps);
  s.e2el_ms = distribution(e2el, ps);
  return s;
}

namespace {

std::string pname(double p) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", p);
  return b;
}

nlohmann::json dist_json(const Distribution& d) {
  nlohmann::json j = {{"mean", d.mean}, {"std", d.std}};
  for (const auto& [p, v] : d.percentiles) j["p" + pname(p)] = v;
  return j;
}

}  // namespace

nlohmann::json summary_json(const Summary& s) {
  nlohmann::json j = {{"completed", s.completed},
                      {"failed", s.failed},
                      {"duration_s", s.duration_s},
                      {"total_input_tokens", s.input_tokens},
                      {"total_output_tokens", s.output_tokens},
                      {"cached_prompt_tokens", s.cached_tokens},
                      {"request_throughput", s.request_throughput},
                      {"output_throughput", s.output_throughput},
                      {"total_token_throughput", s.total_throughput},
                      {"ttft_ms", dist_json(s.ttft_ms)},
                      {"tpot_ms", dist_json(s.tpot_ms)},
                      {"itl_ms", dist_json(s.itl_ms)},
                      {"e2el_ms", dist_json(s.e2el_ms)}};
  if (s.goodput) j["request_goodput"] = *s.goodput;
  if (!s.first_error.empty()) j["first_error"] = s.first_error;
  return j;
}

std::string summary_text(const Summary& s) {
  std::string out;
  char b[256];
  auto line = [&](const char* name, const char* fmt, double v) {
    std::snprintf(b, sizeof b, "%-40s", name);
    out += b;
    std::snprintf(b, sizeof b, fmt, v);
    out += b;
    out += "\n";
  };
  out += "============ Serving Benchmark Result ============\n";
  line("Successful requests:", "%.0f", double(s.completed));
  line("Failed requests:", "%.0f", double(s.failed));
  line("Benchmark duration (s):", "%.2f", s.duration_s);
  line("Total input tokens:", "%.0f", double(s.input_tokens));
  line("Total generated tokens:", "%.0f", double(s.output_tokens));
  line("Prompt tokens from the cache:", "%.0f", double(s.cached_tokens));
  line("Request throughput (req/s):", "%.2f", s.request_throughput);
  if (s.goodput) line("Request goodput (req/s):", "%.2f", *s.goodput);
  line("Output token throughput (tok/s):", "%.2f", s.output_throughput);
  line("Total token throughput (tok/s):", "%.2f", s.total_throughput);
  auto section = [&](const char* title, const char* key, const Distribution& d) {
    std::snprintf(b, sizeof b, "%s\n", title);
    out += b;
    line((std::string("Mean ") + key + " (ms):").c_str(), "%.2f", d.mean);
    for (const auto& [p, v] : d.percentiles)
      line(("P" + pname(p) + " " + key + " (ms):").c_str(), "%.2f", v);
  };
  section("---------------Time to First Token----------------", "TTFT", s.ttft_ms);
  section("-----Time per Output Token (excl. 1st token)------", "TPOT", s.tpot_ms);
  section("---------------Inter-token Latency----------------", "ITL", s.itl_ms);
  section("----------------End-to-end Latency----------------", "E2EL", s.e2el_ms);
  out += "==================================================\n";
  if (!s.first_error.empty()) out += "first error: " + s.first_error + "\n";
  return out;
}

}  // namespace deepinfer::cli::serve_bench

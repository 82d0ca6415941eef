// What `deepinfer bench serve` measures per request and how it sums them up, in vLLM's
// `bench serve` terms: TTFT (request sent to first content), TPOT ((E2E - TTFT) / (output tokens
// - 1)), ITL (gaps between content chunks), E2E latency; throughputs over the run's wall time;
// goodput (requests per second meeting every SLO given); prompt tokens served from the cache.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::cli::serve_bench {

struct RequestRecord {
  bool ok = false;
  std::string error;
  int64_t prompt_tokens = 0, output_tokens = 0, cached_tokens = 0;
  double ttft_s = 0, e2el_s = 0;
  std::vector<double> itl_s;  // gaps between consecutive content chunks
};

// --goodput ttft:MS tpot:MS e2el:MS (vLLM's keys); errors name the bad item.
struct Slo {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
  bool empty() const { return !ttft_ms && !tpot_ms && !e2el_ms; }
};
StatusOr<Slo> parse_goodput(const std::vector<std::string>& items);

// Linear interpolation between closest ranks (numpy's default); 0 for no values.
double percentile(std::vector<double> values, double p);
double tpot_s(const RequestRecord& r);  // 0 with fewer than two output tokens

struct Distribution {
  double mean = 0, std = 0;
  std::map<double, double> percentiles;  // p -> value
};
Distribution distribution(const std::vector<double>& values, const std::vector<double>& ps);

struct Summary {
  int64_t completed = 0, failed = 0;
  double duration_s = 0;
  int64_t input_tokens = 0, output_tokens = 0, cached_tokens = 0;
  double request_throughput = 0, output_throughput = 0, total_throughput = 0;
  std::optional<double> goodput;  // requests/s meeting the SLO, when one is given
  Distribution ttft_ms, tpot_ms, itl_ms, e2el_ms;
  std::string first_error;
};
Summary summarize(const std::vector<RequestRecord>& records, double duration_s, const Slo& slo,
                  const std::vector<double>& percentiles);

nlohmann::json summary_json(const Summary& s);
// vLLM's report layout.
std::string summary_text(const Summary& s);

}  // namespace deepinfer::cli::serve_bench

// Prometheus metrics of `deepinfer serve` (GET /metrics), named and meant as vLLM's with a
// `deepinfer:` prefix. Owned and updated by the io thread only, so nothing here locks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/engine/engine.h"

namespace deepinfer::server {

// Prometheus label values escape backslash, double quote and newline (text format 0.0.4).
std::string escape_label_value(std::string_view v);

// Speculative decoding's counters in vLLM's terms (verifications, draft tokens, accepted tokens,
// accepted tokens per draft position), in exposition format, for `labels`.
std::string render_spec_decode(const std::string& labels, const EngineStats& st);

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // `name` without suffix; `labels` is the inner text of {...} shared by every sample.
  void render(const std::string& name, const std::string& labels, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  void on_first_token(double ttft_s) { ttft_.observe(ttft_s); }
  void on_inter_token(double itl_s) { itl_.observe(itl_s); }
  // A request's final output: finish reason "stop" | "length" | "abort" (vLLM's labels).
  void on_finished(const std::string& reason, double e2e_s, int64_t prompt_tokens,
                   int64_t generation_tokens);
  void on_http_status(int status) { ++http_status_[status]; }

  int64_t in_flight = 0;   // engine requests whose final output the server has not seen yet
  int64_t generating = 0;  // of those, the ones that have produced a token
  int64_t busy = 0;        // requests read whose response is not fully written yet

  // Prometheus text exposition (version 0.0.4). `engine` is null while loading.
  std::string render(const std::string& model_name, const Engine* engine) const;

 private:
  Histogram ttft_, itl_, e2e_;
  std::map<std::string, uint64_t> finished_;  // by finish reason
  std::map<int, uint64_t> http_status_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
};

}  // namespace deepinfer::server

// `deepinfer bench serve`: load against any OpenAI-compatible server (ours or a peer's), in the
// manner of `vllm bench serve`. Requests stream (SSE, stream_options.include_usage) so every
// content chunk is timed; arrivals are a Poisson process at --request-rate (or all at once), at
// most --max-concurrency in flight; warm-up requests go first and are not counted.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "deepinfer/cli/serve_bench/bench_stats.h"
#include "deepinfer/cli/serve_bench/datasets.h"
#include "deepinfer/cli/serve_bench/http_stream.h"

namespace deepinfer::cli::serve_bench {

struct ServeBenchOptions {
  std::string base_url;
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions
  std::string model;                         // empty: the first of GET /v1/models
  std::string tokenizer_dir;
  DatasetOptions dataset;
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s
  int max_concurrency = 0;                                        // 0: unbounded
  int num_warmups = 0;
  double temperature = 0;
  bool ignore_eos = true;
  std::vector<std::string> goodput;  // ttft:MS tpot:MS e2el:MS
  std::vector<double> percentiles = {50, 90, 99};
  double request_timeout_s = 600;
  bool progress = true;  // a progress bar on a terminal's stderr
  std::string json_path = "bench_serve.json";
};

// The request body for one request (streaming, usage included).
std::string request_body(const ServeBenchOptions& o, const std::string& model,
                         const BenchRequest& r);

// Sends one request and times its stream; failures are in the record.
RequestRecord send_one(const BaseUrl& base, const ServeBenchOptions& o, const std::string& body);

// Arrival offsets (seconds from the start) of n requests: all 0 at an infinite rate, else
// exponential gaps with mean 1 / rate.
std::vector<double> arrival_times(int n, double rate, uint64_t seed);

// The whole run: prints the report, writes the JSON; returns the process exit code.
int run_serve_bench(const ServeBenchOptions& o);

}  // namespace deepinfer::cli::serve_bench

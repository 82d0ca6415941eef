// The request sets `deepinfer bench serve` sends (vLLM's dataset names where they exist):
//   random        prompts of uniformly drawn ordinary tokens, input and output lengths drawn
//                 uniformly within +-range_ratio of the given ones;
//   shared-prefix the same, behind one of num_prefixes random prefixes of prefix_len tokens
//                 (request i takes prefix i % num_prefixes): what a prefix cache and a
//                 cache-aware router serve;
//   jsonl         one request per line: {"prompt": "..."} for /v1/completions or
//                 {"messages": [...]} for /v1/chat/completions, optional "max_tokens".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer::cli::serve_bench {

struct BenchRequest {
  std::string prompt;                      // text (random, shared-prefix, jsonl "prompt")
  std::optional<nlohmann::json> messages;  // jsonl "messages"
  int64_t input_tokens = 0;                // by the local tokenizer (0 when unknown)
  int64_t max_tokens = 0;
};

struct DatasetOptions {
  std::string name = "random";
  std::string path;  // jsonl
  int num_prompts = 100;
  int64_t input_len = 1024, output_len = 128;
  double range_ratio = 0;
  int64_t prefix_len = 256;
  int num_prefixes = 4;
  uint64_t seed = 0;
};

// Errors name the flag, or the file and line.
StatusOr<std::vector<BenchRequest>> make_requests(const DatasetOptions& o,
                                                  const tokenizer::Tokenizer& tok);

}  // namespace deepinfer::cli::serve_bench

#include "deepinfer/cli/serve_bench/datasets.h"

#include <algorithm>
#include <fstream>
#include <random>

namespace deepinfer::cli::serve_bench {
namespace {

// Ordinary (not added, not special) ids to draw from.
std::vector<int32_t> ordinary_ids(const tokenizer::Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    if (!tok.is_added(id) && !tok.is_special(id) && tok.token_bytes(id).ok()) ids.push_back(id);
  return ids;
}

int64_t draw_len(int64_t len, double ratio, std::mt19937_64& rng) {
  const int64_t lo = std::max<int64_t>(1, static_cast<int64_t>(double(len) * (1 - ratio)));
  const int64_t hi = std::max(lo, static_cast<int64_t>(double(len) * (1 + ratio)));
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

StatusOr<std::string> random_text(const std::vector<int32_t>& pool, int64_t n,
                                  const tokenizer::Tokenizer& tok, std::mt19937_64& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
  for (auto& id : ids) id = pool[pick(rng)];
  return tok.decode(ids);
}

StatusOr<std::vector<BenchRequest>> from_jsonl(const DatasetOptions& o,
                                               const tokenizer::Tokenizer& tok) {
  std::ifstream f(o.path);
  if (!f) return not_found("--dataset-path '" + o.path + "': cannot open");
  std::vector<BenchRequest> out;
  std::string line;
  for (int no = 1; std::getline(f, line) && int(out.size()) < o.num_prompts; ++no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = o.path + ":" + std::to_string(no);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return invalid_argument(where + ": not a JSON object");
    BenchRequest r;
    if (j.contains("prompt") && j["prompt"].is_string()) {
      r.prompt = j["prompt"].get<std::string>();
      if (auto ids = tok.encode(r.prompt); ids.ok()) r.input_tokens = int64_t(ids->size());
    } else if (j.contains("messages") && j["messages"].is_array()) {
      r.messages = j["messages"];
    } else {
      return invalid_argument(where + ": needs a string \"prompt\" or an array \"messages\"");
    }
    r.max_tokens = o.output_len;
    if (j.contains("max_tokens")) {
      if (!j["max_tokens"].is_number_integer() || j["max_tokens"].get<int64_t>() < 1)
        return invalid_argument(where + ": \"max_tokens\" must be a positive integer");
      r.max_tokens = j["max_tokens"].get<int64_t>();
    }
    out.push_back(std::move(r));
  }
  if (out.empty()) return invalid_argument("--dataset-path '" + o.path + "': no requests");
  return out;
}

}  // namespace

StatusOr<std::vector<BenchRequest>> make_requests(const DatasetOptions& o,
                                                  const tokenizer::Tokenizer& tok) {
  if (o.num_prompts < 1) return invalid_argument("--num-prompts must be at least 1");
  if (o.name == "jsonl") {
    if (o.path.empty()) return invalid_argument("--dataset-name jsonl needs --dataset-path");
    return from_jsonl(o, tok);
  }
  if (o.name != "random" && o.name != "shared-prefix")
    return invalid_argument("--dataset-name '" + o.name + "': one of random, shared-prefix, jsonl");
  if (o.input_len < 1 || o.output_len < 1)
    return invalid_argument("--random-input-len and --random-output-len must be at least 1");
  if (o.range_ratio < 0 || o.range_ratio >= 1)
    return invalid_argument("--random-range-ratio must be in [0, 1)");
  const bool shared = o.name == "shared-prefix";
  if (shared && (o.prefix_len < 1 || o.num_prefixes < 1))
    return invalid_argument("--prefix-len and --num-prefixes must be at least 1");
  const std::vector<int32_t> pool = ordinary_ids(tok);
  if (pool.empty()) return failed_precondition("the tokenizer has no ordinary tokens");
  std::mt19937_64 rng(o.seed);
  std::vector<std::string> prefixes;
  for (int g = 0; shared && g < o.num_prefixes; ++g) {
    ASSIGN_OR_RETURN(std::string p, random_text(pool, o.prefix_len, tok, rng));
    prefixes.push_back(std::move(p));
  }
  std::vector<BenchRequest> out;
  for (int i = 0; i < o.num_prompts; ++i) {
    BenchRequest r;
    ASSIGN_OR_RETURN(std::string text,
                     random_text(pool, draw_len(o.input_len, o.range_ratio, rng), tok, rng));
    r.prompt = shared ? prefixes[size_t(i) % prefixes.size()] + text : std::move(text);
    if (auto ids = tok.encode(r.prompt); ids.ok()) r.input_tokens = int64_t(ids->size());
    r.max_tokens = draw_len(o.output_len, o.range_ratio, rng);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace deepinfer::cli::serve_bench

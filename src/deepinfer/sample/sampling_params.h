// Per-request sampling parameters (vLLM field names), their validation and their JSON form.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/sample/structured_output.h"

namespace deepinfer::sample {

// Temperatures below this sample greedily (vLLM's _SAMPLING_EPS): dividing by ~0 overflows.
inline constexpr float kGreedyTemperature = 1e-5f;
// Upper bound on `logprobs` (vLLM's default max_logprobs; OpenAI's top_logprobs limit).
inline constexpr int kMaxLogprobs = 20;
// OpenAI's documented logit_bias range.
inline constexpr float kMaxLogitBias = 100.0f;

struct SamplingParams {
  int n = 1;
  float temperature = 1.0f;  // < kGreedyTemperature => greedy
  float top_p = 1.0f;        // (0,1]
  int top_k = 0;             // 0 or -1 => disabled
  float min_p = 0.0f;        // [0,1]
  float repetition_penalty =
      1.0f;                        // >0; HF/vLLM: divide positive, multiply negative; prompt+output
  float frequency_penalty = 0.0f;  // [-2,2], OpenAI semantics over output tokens
  float presence_penalty = 0.0f;   // [-2,2]
  std::map<int32_t, float> logit_bias;
  std::optional<uint64_t> seed;
  // DeepSeek's deterministic sampling: the draw for output token i is a function of (seq_seed,
  // i) alone, not of a stream, so the tokens do not depend on how many draws came before
  // (preemption, speculative decoding, replays). Takes precedence over `seed`.
  std::optional<uint64_t> seq_seed;
  int max_tokens = 16;
  int min_tokens = 0;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;  // stop strings
  bool include_stop_str_in_output = false;
  bool ignore_eos = false;
  std::optional<int> logprobs;  // number of top logprobs to return (0 = only the sampled token's)
  bool skip_special_tokens = true;
  // Structured output (constrained decoding); checked by the engine, which compiles it.
  std::optional<StructuredOutput> so_args;
};

// Input errors name the field, e.g. "top_p must be in (0, 1], got 1.5".
Status validate(const SamplingParams& p, int64_t vocab_size);

// Reads the fields above by name from a JSON object. Unknown keys are ignored; null means
// "default" (unset for the optional fields); `stop` may be one string or an array of strings;
// `logit_bias` keys are decimal token ids; `so_args` as structured_output_from_json. Wrong types
// are errors naming the field. Does not range-check: call validate() with the model's vocab size.
StatusOr<SamplingParams> sampling_params_from_json(const nlohmann::json& j);

// The params of the index-th of n parallel samples: n = 1 and, when seeded, seed + index (and
// seq_seed + index), so
// seeded n > 1 requests give n different but reproducible completions (as vLLM does).
SamplingParams child_params(const SamplingParams& p, int index);

}  // namespace deepinfer::sample

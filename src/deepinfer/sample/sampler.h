// Per-sequence token sampler: logit bias, min-tokens masking, penalties, temperature,
// top-k / top-p / min-p and a seeded draw, plus logprobs.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "deepinfer/sample/sampling_params.h"

namespace deepinfer::sample {

struct TokenLogprob {
  int32_t id;
  float logprob;
};

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;           // of `token` when params.logprobs is set (else 0); see below
  std::vector<TokenLogprob> top;  // params.logprobs most likely tokens, most likely first
  bool drew = false;              // the draw took one output of the seeded stream
};

// One per sequence. It owns its RNG, so a given seed yields the same tokens whatever else is
// in the batch. Params are assumed validate()d against the vocab size passed to sample().
//
// Order per call (vLLM-like): logit_bias -> min_tokens mask (eos and stop_token_ids get -inf
// while fewer than min_tokens tokens were accepted) -> repetition, frequency, presence
// penalties -> greedy argmax (ties -> lowest id) if temperature < kGreedyTemperature, else
// temperature -> top_k -> top_p -> min_p -> draw.
//
// Logprobs (result.logprob and result.top) are log-softmax of the logits after bias, mask,
// penalties and temperature, but before top-k/p/min-p truncation (greedy: temperature 1).
// That is the distribution the model plus the user's shaping defines; truncation is a
// sampling device and would give -inf to most of the alternatives asked for.
//
// The draw consumes exactly one 64-bit output of std::mt19937_64 per non-greedy call (none for
// greedy), turned into a double in [0, 1) by its top 53 bits, and walks the surviving
// candidates in ascending id order (in top-p order when top_p < 1). With seq_seed the uniform
// is keyed_uniform(seq_seed, number of accepted output tokens) and the stream is not used.
class SequenceSampler {
 public:
  SequenceSampler(const SamplingParams& p, uint64_t fallback_seed, std::vector<int32_t> prompt_ids);

  // logits: vocab floats, finite or -inf. On return they hold the processed logits (bias,
  // mask, penalties, temperature applied; truncation not applied). eos_token_id < 0: none.
  SampleResult sample(float* logits, int64_t vocab, int32_t eos_token_id);
  // Same, but reuses out->top's capacity so the hot path does not allocate.
  void sample(float* logits, int64_t vocab, int32_t eos_token_id, SampleResult* out);

  // Records an output token (for penalties and min_tokens). Called by the engine after sample.
  void accept(int32_t token);
  // Records a token another sampler of the same params and seed sampled for this position
  // (prefill/decode disaggregation): accept() plus the stream output that sample drew
  // (SampleResult::drew), so later draws are the ones this sampler would have made.
  void accept_external(int32_t token, bool drew);
  const std::vector<int32_t>& output_ids() const { return output_ids_; }
  bool greedy() const { return greedy_; }
  // The next sample is the plain argmax of the raw logits (ties to the lowest id): greedy, no
  // logit bias, no penalties, no logprobs, and min_tokens no longer masking. A runner can then
  // return that argmax instead of the logits.
  bool argmax_suffices() const {
    return greedy_ && bias_.empty() && !penalize_ && !p_.logprobs.has_value() &&
           static_cast<int64_t>(output_ids_.size()) >= p_.min_tokens;
  }

 private:
  void init_vocab_state(int64_t vocab);
  void count_token(int32_t token, bool output);
  void apply_penalties(float* logits) const;
  void top_logprobs(const float* logits, double log_z, int count, SampleResult* out) const;
  int32_t draw(const float* logits, int64_t n);

  SamplingParams p_;
  bool greedy_;
  bool penalize_;
  std::vector<std::pair<int32_t, float>> bias_;
  std::mt19937_64 rng_;
  std::vector<int32_t> prompt_ids_;  // dropped once folded into the vocab-sized state
  std::vector<int32_t> output_ids_;

  // Vocab-sized state, built on the first sample() (the vocab size is not known before).
  int64_t vocab_ = 0;
  std::vector<uint8_t> seen_;          // in prompt or output (repetition penalty)
  std::vector<int32_t> output_count_;  // occurrences in output (frequency/presence)
  std::vector<int32_t> seen_ids_;      // ids with seen_ set, so penalties cost O(distinct)
  std::vector<int32_t> cand_;
  std::vector<float> scratch_;
};

}  // namespace deepinfer::sample

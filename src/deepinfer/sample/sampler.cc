#include "deepinfer/sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "deepinfer/base/check.h"
#include "deepinfer/sample/keyed_random.h"
#include "deepinfer/sample/truncation.h"

namespace deepinfer::sample {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

SequenceSampler::SequenceSampler(const SamplingParams& p, uint64_t fallback_seed,
                                 std::vector<int32_t> prompt_ids)
    : p_(p),
      greedy_(p.temperature < kGreedyTemperature),
      penalize_(p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f ||
                p.presence_penalty != 0.0f),
      bias_(p.logit_bias.begin(), p.logit_bias.end()),
      rng_(p.seed.value_or(fallback_seed)),
      prompt_ids_(std::move(prompt_ids)) {
  output_ids_.reserve(static_cast<size_t>(std::max(p.max_tokens, 0)));
  if (!penalize_) prompt_ids_ = {};
}

void SequenceSampler::init_vocab_state(int64_t vocab) {
  vocab_ = vocab;
  cand_.resize(vocab);
  if (p_.top_k > 0) scratch_.resize(vocab);
  if (!penalize_) return;
  seen_.assign(vocab, 0);
  output_count_.assign(vocab, 0);
  seen_ids_.reserve(prompt_ids_.size() + output_ids_.size());
  for (int32_t t : prompt_ids_) count_token(t, /*output=*/false);
  for (int32_t t : output_ids_) count_token(t, /*output=*/true);
  prompt_ids_ = {};
}

void SequenceSampler::count_token(int32_t token, bool output) {
  if (token < 0 || token >= vocab_) return;  // not a model token; nothing to penalize
  if (!seen_[token]) {
    seen_[token] = 1;
    seen_ids_.push_back(token);
  }
  if (output) ++output_count_[token];
}

void SequenceSampler::accept(int32_t token) {
  output_ids_.push_back(token);
  if (penalize_ && vocab_ > 0) count_token(token, /*output=*/true);
}

void SequenceSampler::accept_external(int32_t token, bool drew) {
  if (drew) rng_.discard(1);
  accept(token);
}

void SequenceSampler::apply_penalties(float* logits) const {
  const float rep = p_.repetition_penalty;
  for (int32_t t : seen_ids_) {
    float& l = logits[t];
    if (rep != 1.0f) l = l > 0.0f ? l / rep : l * rep;
    const int32_t c = output_count_[t];
    if (c > 0) l -= p_.frequency_penalty * static_cast<float>(c) + p_.presence_penalty;
  }
}

void SequenceSampler::top_logprobs(const float* logits, double log_z, int count,
                                   SampleResult* out) const {
  // Insertion into a sorted buffer of <= kMaxLogprobs entries: O(vocab) with a cheap reject.
  auto& top = out->top;
  auto better = [logits](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  };
  for (int32_t i = 0; i < static_cast<int32_t>(vocab_); ++i) {
    if (static_cast<int>(top.size()) == count && !better(i, top.back().id)) continue;
    if (static_cast<int>(top.size()) < count) top.push_back({i, 0.0f});
    size_t j = top.size() - 1;
    while (j > 0 && better(i, top[j - 1].id)) {
      top[j] = top[j - 1];
      --j;
    }
    top[j] = {i, 0.0f};
  }
  for (auto& e : top) e.logprob = static_cast<float>(logits[e.id] - log_z);
}

int32_t SequenceSampler::draw(const float* logits, int64_t n) {
  float max_logit = logits[cand_[0]];
  for (int64_t i = 1; i < n; ++i) max_logit = std::max(max_logit, logits[cand_[i]]);
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i)
    total += std::exp(static_cast<double>(logits[cand_[i]]) - max_logit);
  // Top 53 bits -> [0, 1): independent of the standard library's distributions. With seq_seed,
  // keyed by the output position (this token's index) instead of the stream.
  const double u = p_.seq_seed.has_value() ? keyed_uniform(*p_.seq_seed, output_ids_.size())
                                           : static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  const double target = u * total;
  double cum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    cum += std::exp(static_cast<double>(logits[cand_[i]]) - max_logit);
    if (cum > target) return cand_[i];
  }
  return cand_[n - 1];  // rounding left target at the very top
}

SampleResult SequenceSampler::sample(float* logits, int64_t vocab, int32_t eos_token_id) {
  SampleResult r;
  sample(logits, vocab, eos_token_id, &r);
  return r;
}

void SequenceSampler::sample(float* logits, int64_t vocab, int32_t eos_token_id,
                             SampleResult* out) {
  DI_CHECK(vocab > 0);
  if (vocab_ == 0) init_vocab_state(vocab);
  DI_CHECK(vocab == vocab_);  // one sequence, one model

  for (const auto& [id, b] : bias_) {
    if (id >= 0 && id < vocab) logits[id] += b;
  }
  if (static_cast<int64_t>(output_ids_.size()) < p_.min_tokens) {
    if (eos_token_id >= 0 && eos_token_id < vocab) logits[eos_token_id] = kNegInf;
    for (int32_t id : p_.stop_token_ids) {
      if (id >= 0 && id < vocab) logits[id] = kNegInf;
    }
  }
  if (penalize_) apply_penalties(logits);
  if (!greedy_ && p_.temperature != 1.0f) {
    for (int64_t i = 0; i < vocab; ++i) logits[i] /= p_.temperature;
  }

  float max_logit = logits[0];
  int32_t argmax = 0;
  for (int64_t i = 1; i < vocab; ++i) {
    if (logits[i] > max_logit) {
      max_logit = logits[i];
      argmax = static_cast<int32_t>(i);
    }
  }
  double log_z = 0.0;  // everything masked: logprobs come out -inf rather than NaN
  // The normalizer costs a pass of exp over the vocabulary: only pay it when logprobs are asked.
  const bool want_logprobs = p_.logprobs.has_value();
  if (want_logprobs && max_logit > kNegInf) {
    double z = 0.0;
    for (int64_t i = 0; i < vocab; ++i) z += std::exp(static_cast<double>(logits[i]) - max_logit);
    log_z = static_cast<double>(max_logit) + std::log(z);
  }

  int32_t token = argmax;
  bool drew = false;
  if (!greedy_ && max_logit > kNegInf) {
    int64_t n = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      if (logits[i] > kNegInf) cand_[n++] = static_cast<int32_t>(i);
    }
    n = top_k_filter(logits, cand_.data(), n, p_.top_k, scratch_.data());
    n = top_p_filter(logits, cand_.data(), n, p_.top_p);
    n = min_p_filter(logits, cand_.data(), n, p_.min_p);
    token = draw(logits, n);
    drew = !p_.seq_seed.has_value();
  }

  out->token = token;
  out->drew = drew;
  out->logprob = want_logprobs ? static_cast<float>(logits[token] - log_z) : 0.0f;
  out->top.clear();
  if (p_.logprobs.has_value() && *p_.logprobs > 0) {
    top_logprobs(logits, log_z, std::min<int>(*p_.logprobs, static_cast<int>(vocab)), out);
  }
}

}  // namespace deepinfer::sample

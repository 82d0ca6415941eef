// Top-k / top-p / min-p over a candidate list. The sampler keeps logits intact and shrinks a
// list of token ids instead, so the pre-truncation logprobs stay readable after truncation.
// Each filter takes cand[0, n) and returns the new count; the survivors are cand[0, count).
// None allocates; all keep at least the most likely candidate when n > 0.
#pragma once

#include <cstdint>

namespace deepinfer::sample {

// Keeps candidates whose logit is >= the k-th largest (so ties at the threshold all survive,
// like vLLM's masked_fill(logits < kth)). k <= 0 or k >= n keeps everything. Order of the
// survivors is kept. scratch must hold n floats.
int64_t top_k_filter(const float* logits, int32_t* cand, int64_t n, int k, float* scratch);

// Sorts cand by (logit descending, id ascending) and keeps the shortest prefix whose
// probability mass (softmax over cand) reaches p: a token survives iff the mass strictly
// before it is < p. p >= 1 keeps everything without sorting.
int64_t top_p_filter(const float* logits, int32_t* cand, int64_t n, float p);

// Keeps candidates with prob >= min_p * max prob, i.e. exp(logit - max logit) >= min_p.
// Order is kept. min_p <= 0 keeps everything.
int64_t min_p_filter(const float* logits, int32_t* cand, int64_t n, float min_p);

}  // namespace deepinfer::sample

#include "deepinfer/sample/truncation.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace deepinfer::sample {

int64_t top_k_filter(const float* logits, int32_t* cand, int64_t n, int k, float* scratch) {
  if (k <= 0 || k >= n) return n;
  for (int64_t i = 0; i < n; ++i) scratch[i] = logits[cand[i]];
  std::nth_element(scratch, scratch + (k - 1), scratch + n, std::greater<float>());
  const float threshold = scratch[k - 1];
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (logits[cand[i]] >= threshold) cand[kept++] = cand[i];
  }
  return kept;
}

int64_t top_p_filter(const float* logits, int32_t* cand, int64_t n, float p) {
  if (p >= 1.0f || n <= 1) return n;
  std::sort(cand, cand + n, [logits](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  const double max_logit = logits[cand[0]];
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i)
    total += std::exp(static_cast<double>(logits[cand[i]]) - max_logit);
  const double target = static_cast<double>(p) * total;
  double before = 0.0;
  int64_t kept = 0;
  while (kept < n && before < target) {
    before += std::exp(static_cast<double>(logits[cand[kept]]) - max_logit);
    ++kept;
  }
  return std::max<int64_t>(kept, 1);
}

int64_t min_p_filter(const float* logits, int32_t* cand, int64_t n, float min_p) {
  if (min_p <= 0.0f || n <= 1) return n;
  float max_logit = logits[cand[0]];
  for (int64_t i = 1; i < n; ++i) max_logit = std::max(max_logit, logits[cand[i]]);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double rel = std::exp(static_cast<double>(logits[cand[i]]) - max_logit);
    if (rel >= static_cast<double>(min_p)) cand[kept++] = cand[i];
  }
  return kept;
}

}  // namespace deepinfer::sample

// Test-only helpers shared by the expert-parallel test and its rank process: the sequence each
// rank runs and the run itself.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer {

struct Run {
  std::vector<float> logits;  // every prompt position, then each decode step's
  std::vector<int32_t> tokens;
  Status status;
};

// Three prefill chunks of `prompt`, then `steps` greedy decode steps: the same number of
// forward calls for every prompt length, so ranks stay in step.
template <class Model>
Run run(const Model& m, const std::vector<int32_t>& prompt, int steps) {
  Run r;
  auto st = m.new_sequence();
  std::vector<float> part;
  const int64_t n = static_cast<int64_t>(prompt.size()), third = (n + 2) / 3;
  for (int64_t at = 0; at < n; at += third) {
    r.status = m.forward(st, &prompt[at], std::min(third, n - at), true, &part);
    if (!r.status.ok()) return r;
    r.logits.insert(r.logits.end(), part.begin(), part.end());
  }
  const int64_t vocab = m.config().vocab_size;
  for (int s = 0; s < steps; ++s) {
    const float* last = &r.logits[r.logits.size() - vocab];
    const int32_t next = static_cast<int32_t>(std::max_element(last, last + vocab) - last);
    r.tokens.push_back(next);
    r.status = m.forward(st, &next, 1, false, &part);
    if (!r.status.ok()) return r;
    r.logits.insert(r.logits.end(), part.begin(), part.end());
  }
  return r;
}

inline std::vector<std::vector<int32_t>> ep_prompts(int count, int64_t vocab) {
  std::mt19937_64 rng(7);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> p(20 + 37 * i);  // different lengths: uneven token counts per rank
    for (auto& id : p) id = static_cast<int32_t>(2 + rng() % (vocab - 2));
    out.push_back(p);
  }
  return out;
}

}  // namespace deepinfer

// Manifold-constrained hyper-connections (spec §6.2, §6.3, §6.9) for one token.
#pragma once

#include <cstdint>

#include "deepinfer/model/deepseek_v4/config.h"

namespace deepinfer::v4 {

struct HcWeights {
  const float* fn;     // [mix, hc*H] (or [hc, hc*H] for the head)
  const float* base;   // [mix]
  const float* scale;  // [3] (or [1])
};

// From the hc x H streams X: the collapsed sub-layer input y (H), post (hc) and the
// Sinkhorn-normalized comb (hc x hc, row j = source stream).
void hc_pre(const Config& c, const HcWeights& w, const float* X, float* y, float* post,
            float* comb);
// X'[k] = post[k] * f + sum_j comb[j][k] * X[j], in place over X.
void hc_post(const Config& c, const float* f, const float* post, const float* comb, float* X);
// Final collapse before the norm and head: y = sum_j pre_j X[j].
void hc_head(const Config& c, const HcWeights& w, const float* X, float* y);

}  // namespace deepinfer::v4

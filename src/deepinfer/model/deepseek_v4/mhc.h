// Manifold-constrained hyper-connections (spec §6.2, §6.3, §6.9) for one token. The pieces are
// separate because V4.1 (spec §11.2.1) collapses a site's input with the previous site's `pre`.
#pragma once

#include <cstdint>

#include "deepinfer/model/deepseek_v4/config.h"

namespace deepinfer::v4 {

struct HcWeights {
  const float* fn;     // [mix, hc*H] (or [hc, hc*H] for the head)
  const float* base;   // [mix]
  const float* scale;  // [3] (or [1])
};

// What the mHC math reads from a config; both families fill it.
struct HcDims {
  int hc_mult = 0;
  int64_t hidden = 0;
  int sinkhorn_iters = 0;
  float norm_eps = 0;  // rms_norm_eps: the unweighted norm of the flattened streams
  float hc_eps = 0;
  int mix() const { return (2 + hc_mult) * hc_mult; }
};
HcDims hc_dims(const Config& c);

// One site's coefficients from the hc x H streams X: pre (hc), post (hc) and the
// Sinkhorn-normalized comb (hc x hc, row j = source stream).
void hc_mixes(const HcDims& d, const HcWeights& w, const float* X, float* pre, float* post,
              float* comb);
// The sub-layer input y (H) = sum_j pre_j X[j].
void hc_collapse(const HcDims& d, const float* pre, const float* X, float* y);
// X'[k] = post[k] * f + sum_j comb[j][k] * X[j], in place over X.
void hc_expand(const HcDims& d, const float* f, const float* post, const float* comb, float* X);

// V4: hc_mixes, then the collapse with the same site's pre.
void hc_pre(const Config& c, const HcWeights& w, const float* X, float* y, float* post,
            float* comb);
void hc_post(const Config& c, const float* f, const float* post, const float* comb, float* X);
// Final collapse before the norm and head: y = sum_j pre_j X[j].
void hc_head(const Config& c, const HcWeights& w, const float* X, float* y);

}  // namespace deepinfer::v4

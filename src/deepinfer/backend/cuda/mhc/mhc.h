// Manifold-constrained hyper-connections (spec §6.2, §6.3, §6.9) over a batch of tokens, each
// with hc streams of `hidden` values (X: [tokens, hc, hidden]).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

struct HcArgs {
  const float* fn = nullptr;     // [(2 + hc) * hc, hc * hidden] (hc_pre) or [hc, hc * hidden]
  const float* base = nullptr;   // [(2 + hc) * hc] or [hc]
  const float* scale = nullptr;  // [3] or [1]
  int64_t tokens = 0, hidden = 0;
  int hc = 4, sinkhorn_iters = 20;
  float norm_eps = 1e-6f, hc_eps = 1e-6f;
  // Device scratch of hc_scratch_floats(tokens, hc, hidden) floats: the mixes' partial sums.
  float* partials = nullptr;
  // hc_pre and hc_pre_deferred only: with y_norm set, y leaves RMSNorm-ed (weight y_norm,
  // epsilon y_norm_eps), the same bits as rms_norm on it afterwards, one launch fewer.
  const float* y_norm = nullptr;
  float y_norm_eps = 1e-6f;
  // hc_pre and hc_pre_deferred, with y_norm: y's values also go here rounded to bf16 ([tokens,
  // hidden]; the bits of to_bf16 on y), for the sub-layer's projections: one launch fewer.
  __nv_bfloat16* y_bf16 = nullptr;
};

// Callers fuse the norm up to this many tokens and launch rms_norm after hc_pre past it: on an
// H100 the fused form took 0.09 ms off a B=1..256 decode step's mHC, but made a 2048-token
// prefill chunk's hc_pre 32 us a site slower than the separate norm saved (docs/gpu_next_b1/).
inline constexpr int64_t kHcFusedNormMaxRows = 512;

// The mixes (fn rows . the token's normalized streams) are split over many blocks, each summing
// a slice of the hc * hidden values, then summed per token in a fixed order: a token's mixes no
// longer run on one SM (decode has one token per sequence), and reruns stay bit-identical.
size_t hc_scratch_floats(int64_t tokens, int hc, int64_t hidden);

// y [tokens, hidden], post [tokens, hc], comb [tokens, hc, hc] (row j = source stream).
void hc_pre(const HcArgs& a, const float* X, float* y, float* post, float* comb,
            cudaStream_t stream);
// V4.1's deferred mHC (spec §11): the site's mixes from X as hc_pre, but y collapses X with
// pre_in (the previous site's pre, [tokens, hc]); the site's own pre goes to pre_out, which may
// alias pre_in.
void hc_pre_deferred(const HcArgs& a, const float* X, const float* pre_in, float* pre_out, float* y,
                     float* post, float* comb, cudaStream_t stream);
// y [tokens, hidden] = sum_j pre[t, j] X[t, j] (V4.1's final collapse, with the last site's pre).
void hc_collapse(const float* pre, const float* X, int64_t tokens, int hc, int64_t hidden, float* y,
                 cudaStream_t stream);
// In place: X'[k] = post[k] * f + sum_j comb[j][k] * X[j].
void hc_post(const float* f, const float* post, const float* comb, int64_t tokens, int hc,
             int64_t hidden, float* X, cudaStream_t stream);
// y = sum_j (sigmoid(m_j * scale + base_j) + hc_eps) X[j].
void hc_head(const HcArgs& a, const float* X, float* y, cudaStream_t stream);

}  // namespace deepinfer::cuda

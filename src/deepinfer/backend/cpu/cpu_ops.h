// Readable fp32 reference kernels. Every reduction runs in a fixed order per output element, so
// results do not depend on batch size, chunking or thread count (path independence).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace deepinfer::cpu {

float dot(const float* a, const float* b, int64_t n);

// y[t, o] = sum_k x[t, k] * W[o, k] for t < n; W is [out, in] row-major. Multithreaded.
void linear(const float* w, int64_t out, int64_t in, const float* x, int64_t n, float* y);

// linear for GEMMs that stay fp32 on every device (MoE routers: their top-k is a discrete choice);
// the operand rounding below never applies to it.
void linear_fp32(const float* w, int64_t out, int64_t in, const float* x, int64_t n, float* y);

// Tests of the GPU forwards only, process-wide: while on, linear() and grouped_linear() round
// their weight and input operands to bf16 (nearest even) first, as the CUDA projections do, so a
// CPU reference sees the GPU's operands and the two differ only in summation order.
void set_bf16_operands(bool on);

// Block-diagonal linear: x rows hold `groups` slices of in_per_group values, W is [groups *
// out_per_group, in_per_group] and slice g goes through row block g only (the grouped output
// projection, spec §6.5). Same reduction per element as linear().
void grouped_linear(const float* w, int groups, int64_t out_per_group, int64_t in_per_group,
                    const float* x, int64_t n, float* y);

// y = x * rsqrt(mean(x^2) + eps) (* weight when weight != nullptr); y may alias x.
void rms_norm(const float* x, const float* weight, int64_t d, float eps, float* y);

// Softmax over q . keys[k] * scale (k < n) together with a sink logit that takes probability
// but adds nothing; out[hd] = sum_k p_k keys[k] (spec §6.5).
void sink_attention(const float* q, const float* const* keys, int64_t n, float sink, int hd,
                    float scale, float* out);

// out[c] = sum_j softmax_j(gate[j][c]) * kv[j][c] over `rows` slots (the compressors' pooling,
// spec §6.6).
void softmax_pool(const float* const* kv, const float* const* gate, int rows, int dim, float* out);

// The lightning indexer's score of one key (spec §6.7): sum_h w[h] * weight_scale *
// relu(q[h] . key) * score_scale over heads of head_dim values.
float indexer_score(const float* q, const float* w, const float* key, int heads, int head_dim,
                    float weight_scale, float score_scale);

// Indices of the k highest of scores[0..n) (ties: the lower index), in ascending index order.
std::vector<int64_t> top_k_indices(const float* scores, int64_t n, int64_t k);

// The SwiGLU activation in place over `gate`: silu(g) * u, with the clamps the experts train
// with when `clamp` (up to [-limit, limit], gate from above only).
void swiglu(float* gate, const float* up, int64_t n, bool clamp, float limit);

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch.nn.functional.softplus with its default threshold of 20.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace deepinfer::cpu

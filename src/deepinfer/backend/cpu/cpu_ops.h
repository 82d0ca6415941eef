// Readable fp32 reference kernels. Every reduction runs in a fixed order per output element, so
// results do not depend on batch size, chunking or thread count (path independence).
#pragma once

#include <cmath>
#include <cstdint>

namespace deepinfer::cpu {

float dot(const float* a, const float* b, int64_t n);

// y[t, o] = sum_k x[t, k] * W[o, k] for t < n; W is [out, in] row-major. Multithreaded.
void linear(const float* w, int64_t out, int64_t in, const float* x, int64_t n, float* y);

// y = x * rsqrt(mean(x^2) + eps) (* weight when weight != nullptr); y may alias x.
void rms_norm(const float* x, const float* weight, int64_t d, float eps, float* y);

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch.nn.functional.softplus with its default threshold of 20.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace deepinfer::cpu

// RMSNorm over rows: y = x * rsqrt(mean(x^2) + eps) (* weight when non-null). y may alias x.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

// Threads of rms_norm's block a row (its sums' order depends on it: kernels that fuse its form
// use the same).
inline constexpr int kNormBlock = 256;

void rms_norm(const float* x, const float* weight, int64_t rows, int64_t d, float eps, float* y,
              cudaStream_t stream);
// The same, y rounded to bf16 as it is stored: the bits of rms_norm then to_bf16, one launch.
void rms_norm(const float* x, const float* weight, int64_t rows, int64_t d, float eps,
              __nv_bfloat16* y, cudaStream_t stream);

// Unweighted, a warp a row: for many short rows (V4's per-head q norm, 64 rows of 512 a token),
// where rms_norm's block a row spent its time in barriers. Its own order of the sum (fixed, so
// a row's bits do not depend on the launch), not rms_norm's.
void rms_norm_rows(const float* x, int64_t rows, int64_t d, float eps, float* y,
                   cudaStream_t stream);

}  // namespace deepinfer::cuda

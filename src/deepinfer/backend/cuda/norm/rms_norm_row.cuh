// One row's RMSNorm by one block, the order of every sum fixed: rms_norm's kernel and the kernels
// that fuse a norm onto a row they just wrote (hc_pre's collapse) share it, so the fused form
// gives the same bits as the separate launch.
#pragma once

#include <cstdint>

#include "deepinfer/backend/cuda/reduce.cuh"

namespace deepinfer::cuda {

// y = x * rsqrt(mean(x^2) + eps) (* w when non-null); y may alias x. `scratch`: 32 floats of
// shared memory (block_sum's). Every thread of the block calls it.
__device__ inline void rms_norm_row(const float* x, const float* w, int64_t d, float eps, float* y,
                                    float* scratch) {
  float ss = 0;
  // An explicit FMA: the decode compressor normalizes its entries with the same sum.
  // Unrolled so that a thread's loads are in flight together (decode normalizes one row a
  // block); the chain keeps its order.
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) ss = __fmaf_rn(x[i], x[i], ss);
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) y[i] = x[i] * inv * (w ? w[i] : 1.0f);
}

}  // namespace deepinfer::cuda

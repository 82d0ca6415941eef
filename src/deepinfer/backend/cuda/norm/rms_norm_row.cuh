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
  // kAhead columns' loads before their stores: y may alias x, so the compiler keeps every load
  // behind the previous column's store, and decode's one row a block waited on w's loads from
  // memory one column at a time (16 round trips a thread at d = 4096).
  constexpr int kAhead = 8;
  const int64_t step = blockDim.x;
  int64_t i = threadIdx.x;
  for (; i + (kAhead - 1) * step < d; i += kAhead * step) {
    float xv[kAhead], wv[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      xv[u] = x[i + u * step];
      wv[u] = w ? w[i + u * step] : 1.0f;
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) y[i + u * step] = xv[u] * inv * wv[u];
  }
  for (; i < d; i += step) y[i] = x[i] * inv * (w ? w[i] : 1.0f);
}

}  // namespace deepinfer::cuda

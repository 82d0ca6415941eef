// One row's RMSNorm by one block, the order of every sum fixed: rms_norm's kernel and the kernels
// that fuse a norm onto a row they just wrote (hc_pre's collapse) share it, so the fused form
// gives the same bits as the separate launch.
#pragma once

#include <cstdint>

#include "deepinfer/backend/cuda/reduce.cuh"

namespace deepinfer::cuda {

// Columns a thread keeps in registers: rows of up to kNormRegs * blockDim.x values (V4's 4096 at
// 256 threads) are loaded whole before the sum, one round of memory latency where the loop below
// takes one per 4 columns of the sum and per 8 of the scaling (decode normalizes one row a block).
inline constexpr int kNormRegs = 16;

// rms_norm_row's second half for a row whose thread values are in registers: v[u] is column
// threadIdx.x + u * blockDim.x (columns past d ignored). The same sums in the same order as the
// loop in rms_norm_row, so the same bits.
__device__ inline void rms_norm_regs(const float (&v)[kNormRegs], const float* w, int64_t d,
                                     float eps, float* y, float* scratch) {
  const int64_t step = blockDim.x;
  float wv[kNormRegs];
#pragma unroll
  for (int u = 0; u < kNormRegs; ++u) {
    const int64_t i = threadIdx.x + u * step;
    wv[u] = w && i < d ? w[i] : 1.0f;  // in flight during the reduction
  }
  float ss = 0;
#pragma unroll
  for (int u = 0; u < kNormRegs; ++u)
    if (threadIdx.x + u * step < d) ss = __fmaf_rn(v[u], v[u], ss);
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(d) + eps);
#pragma unroll
  for (int u = 0; u < kNormRegs; ++u) {
    const int64_t i = threadIdx.x + u * step;
    if (i < d) y[i] = v[u] * inv * wv[u];
  }
}

// y = x * rsqrt(mean(x^2) + eps) (* w when non-null); y may alias x. `scratch`: 32 floats of
// shared memory (block_sum's). Every thread of the block calls it. The loop form, for kernels
// whose register budget has no room for rms_norm_row's (hc_pre's prefill instance); same bits.
__device__ inline void rms_norm_row_loop(const float* x, const float* w, int64_t d, float eps,
                                         float* y, float* scratch) {
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

// rms_norm_row_loop, with rows of up to kNormRegs * blockDim.x values loaded whole first.
__device__ inline void rms_norm_row(const float* x, const float* w, int64_t d, float eps, float* y,
                                    float* scratch) {
  if (d > kNormRegs * int64_t{blockDim.x}) {
    rms_norm_row_loop(x, w, d, eps, y, scratch);
    return;
  }
  float v[kNormRegs];
#pragma unroll
  for (int u = 0; u < kNormRegs; ++u) {
    const int64_t i = threadIdx.x + u * int64_t{blockDim.x};
    v[u] = i < d ? x[i] : 0.0f;
  }
  rms_norm_regs(v, w, d, eps, y, scratch);
}

}  // namespace deepinfer::cuda

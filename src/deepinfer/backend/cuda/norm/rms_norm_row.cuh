// One row's RMSNorm by one block, the order of every sum fixed: rms_norm's kernel and the kernels
// that fuse a norm onto a row they just wrote (hc_pre's collapse) share it, so the fused form
// gives the same bits as the separate launch.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "deepinfer/backend/cuda/reduce.cuh"

namespace deepinfer::cuda {

// Where a normalized value goes (the norms' Out): fp32 as is, bf16 rounded to nearest even
// (to_bf16's rounding, so a norm writing bf16 gives the bits of rms_norm then to_bf16), or both.
struct F32AndBf16 {
  float* f;
  __nv_bfloat16* b;
};
__device__ inline void put(float* y, int64_t i, float v) { y[i] = v; }
__device__ inline void put(__nv_bfloat16* y, int64_t i, float v) { y[i] = __float2bfloat16_rn(v); }
__device__ inline void put(const F32AndBf16& y, int64_t i, float v) {
  y.f[i] = v;
  y.b[i] = __float2bfloat16_rn(v);
}

// Columns a thread keeps in registers: rows of up to kNormRegs * blockDim.x values (V4's 4096 at
// 256 threads) are loaded whole before the sum, one round of memory latency where the loop below
// takes one per 4 columns of the sum and per 8 of the scaling (decode normalizes one row a block).
inline constexpr int kNormRegs = 16;

// The weights rms_norm_regs multiplies column threadIdx.x + u * blockDim.x by (1 where w is null
// or past d). A kernel may load them before its PDL wait: they are weights.
struct NormWeights {
  float v[kNormRegs];
};
__device__ inline NormWeights load_norm_weights(const float* w, int64_t d) {
  NormWeights n;
#pragma unroll
  for (int u = 0; u < kNormRegs; ++u) {
    const int64_t i = threadIdx.x + u * int64_t{blockDim.x};
    n.v[u] = w && i < d ? w[i] : 1.0f;
  }
  return n;
}

// rms_norm_row's second half for a row whose thread values are in registers: v[u] is column
// threadIdx.x + u * blockDim.x (columns past d ignored), wv from load_norm_weights. The same sums
// in the same order as rms_norm_row_loop, so the same bits.
template <typename Out>
__device__ inline void rms_norm_regs(const float (&v)[kNormRegs], const float (&wv)[kNormRegs],
                                     int64_t d, float eps, Out y, float* scratch) {
  const int64_t step = blockDim.x;
  float ss = 0;
#pragma unroll
  for (int u = 0; u < kNormRegs; ++u)
    if (threadIdx.x + u * step < d) ss = __fmaf_rn(v[u], v[u], ss);
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(d) + eps);
#pragma unroll
  for (int u = 0; u < kNormRegs; ++u) {
    const int64_t i = threadIdx.x + u * step;
    if (i < d) put(y, i, v[u] * inv * wv[u]);
  }
}

// y = x * rsqrt(mean(x^2) + eps) (* w when non-null); y may alias x. `scratch`: 32 floats of
// shared memory (block_sum's). Every thread of the block calls it. The loop form, for kernels
// whose register budget has no room for rms_norm_row's (hc_pre's prefill instance); same bits.
template <typename Out>
__device__ inline void rms_norm_row_loop(const float* x, const float* w, int64_t d, float eps,
                                         Out y, float* scratch) {
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
    for (int u = 0; u < kAhead; ++u) put(y, i + u * step, xv[u] * inv * wv[u]);
  }
  for (; i < d; i += step) put(y, i, x[i] * inv * (w ? w[i] : 1.0f));
}

// Whether rms_norm_row takes a row of d values in registers (rms_norm_row_regs).
__device__ inline bool norm_row_fits_regs(int64_t d) {
  return d <= kNormRegs * int64_t{blockDim.x};
}

// rms_norm_row for norm_row_fits_regs(d), the weights already loaded (load_norm_weights): the
// row's values are loaded whole first.
template <typename Out>
__device__ inline void rms_norm_row_regs(const float* x, const float (&wv)[kNormRegs], int64_t d,
                                         float eps, Out y, float* scratch) {
  float v[kNormRegs];
#pragma unroll
  for (int u = 0; u < kNormRegs; ++u) {
    const int64_t i = threadIdx.x + u * int64_t{blockDim.x};
    v[u] = i < d ? x[i] : 0.0f;
  }
  rms_norm_regs(v, wv, d, eps, y, scratch);
}

// The weights rms_norm_row keeps in registers for a row of d values where it fits
// (norm_row_fits_regs); none else, the loop reading w itself. Weights: a kernel may load them
// before its PDL wait and pass them to rms_norm_row.
__device__ inline NormWeights preload_norm_weights(const float* w, int64_t d) {
  return norm_row_fits_regs(d) ? load_norm_weights(w, d) : NormWeights{};
}

// rms_norm_row_loop, with rows of up to kNormRegs * blockDim.x values loaded whole first; wv:
// preload_norm_weights(w, d).v.
template <typename Out>
__device__ inline void rms_norm_row(const float* x, const float (&wv)[kNormRegs], const float* w,
                                    int64_t d, float eps, Out y, float* scratch) {
  if (norm_row_fits_regs(d))
    rms_norm_row_regs(x, wv, d, eps, y, scratch);
  else
    rms_norm_row_loop(x, w, d, eps, y, scratch);
}

// Unweighted, one row by one warp (rms_norm_rows' form: V4's per-head q norm, 64 rows of 512 a
// token); its own order of the sum, fixed. y may alias x.
__device__ inline void rms_norm_row_warp(const float* x, int64_t d, float eps, float* y) {
  const int lane = threadIdx.x & 31;
  float ss = 0;
  if (d % 4 == 0) {  // rows 16-byte aligned: a lane's 4 consecutive values a load
    const float4* x4 = reinterpret_cast<const float4*>(x);
#pragma unroll 4
    for (int64_t i = lane; i < d / 4; i += 32) {
      const float4 v = x4[i];
      ss = __fmaf_rn(v.x, v.x, ss);
      ss = __fmaf_rn(v.y, v.y, ss);
      ss = __fmaf_rn(v.z, v.z, ss);
      ss = __fmaf_rn(v.w, v.w, ss);
    }
    const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(d) + eps);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (int64_t i = lane; i < d / 4; i += 32) {
      const float4 v = x4[i];
      y4[i] = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
    }
    return;
  }
  for (int64_t i = lane; i < d; i += 32) ss = __fmaf_rn(x[i], x[i], ss);
  const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(d) + eps);
  for (int64_t i = lane; i < d; i += 32) y[i] = x[i] * inv;
}

}  // namespace deepinfer::cuda

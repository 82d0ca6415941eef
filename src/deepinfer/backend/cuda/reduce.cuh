// Warp and block reductions for the kernels in this directory (blockDim.x a multiple of 32, at
// most 1024). Every thread gets the result.
#pragma once

#include <cfloat>

namespace deepinfer::cuda {

struct SumOp {
  static constexpr float kIdentity = 0.0f;
  __device__ float operator()(float a, float b) const { return a + b; }
};

struct MaxOp {
  static constexpr float kIdentity = -FLT_MAX;
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename Op>
__device__ inline float warp_reduce(float v, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// `scratch` holds 32 floats of shared memory; the call ends with a barrier so it can be reused.
template <typename Op>
__device__ inline float block_reduce(float v, float* scratch, Op op) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_reduce(v, op);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = lane < warps ? scratch[lane] : Op::kIdentity;
  r = warp_reduce(r, op);
  __syncthreads();
  return r;
}

// Sums each of a lane's N values over the warp and leaves value lane / (32 / N)'s sum in that
// lane (a reduce-scatter: log2(N) halving rounds, each exchanging half the values, then plain
// rounds), in a fixed order. Recursion keeps every index a constant (the values in registers).
template <int N>
__device__ __forceinline__ float reduce_scatter(float* v, int lane, int o = 16) {
  if constexpr (N == 1) {
    float s = v[0];
    for (; o >= 1; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
  } else {
    const bool upper = (lane & o) != 0;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      const float keep = upper ? v[i + N / 2] : v[i];
      const float send = upper ? v[i] : v[i + N / 2];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
    return reduce_scatter<N / 2>(v, lane, o >> 1);
  }
}

// One butterfly step: lanes keep values [0, O) of 2 O, the upper half where their bit O is set,
// plus their partner's matching half.
template <int O>
__device__ inline void transpose_sum_step(float (&v)[32], int lane) {
  const bool upper = (lane & O) != 0;
#pragma unroll
  for (int i = 0; i < O; ++i) {
    const float keep = upper ? v[i + O] : v[i], send = upper ? v[i] : v[i + O];
    v[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
  }
}

// 32 sums at once: lane l returns the sum over the warp of v[l] (v is consumed). Five butterfly
// steps, 31 shuffles in all where 32 warp_sums take 160; a fixed order, so the bits never change.
__device__ inline float warp_transpose_sum(float (&v)[32]) {
  const int lane = threadIdx.x & 31;
  transpose_sum_step<16>(v, lane);
  transpose_sum_step<8>(v, lane);
  transpose_sum_step<4>(v, lane);
  transpose_sum_step<2>(v, lane);
  transpose_sum_step<1>(v, lane);
  return v[0];
}

// Warps that split a sum's k into ks shares, adjacent with share = warp % ks: the share-0 warp's
// lanes get their N values plus the other shares' (lane for lane), added in warp order.
// red: [warps of the block][N][32] floats of shared memory. It holds a barrier, so every thread
// of the block calls it; red is free again only after another barrier.
template <int N>
__device__ inline void add_k_shares(float (&v)[N], float (*red)[N][32], int share, int ks) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < N; ++i) red[warp][i][lane] = v[i];
  __syncthreads();
  if (share != 0) return;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    float s = v[i];
    for (int k = 1; k < ks; ++k) s += red[warp + k][i][lane];
    v[i] = s;
  }
}

__device__ inline float warp_sum(float v) { return warp_reduce(v, SumOp{}); }
__device__ inline float warp_max(float v) { return warp_reduce(v, MaxOp{}); }
__device__ inline float block_sum(float v, float* scratch) {
  return block_reduce(v, scratch, SumOp{});
}
__device__ inline float block_max(float v, float* scratch) {
  return block_reduce(v, scratch, MaxOp{});
}

}  // namespace deepinfer::cuda

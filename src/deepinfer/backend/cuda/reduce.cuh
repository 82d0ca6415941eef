// Warp and block reductions for the kernels in this directory (blockDim.x a multiple of 32, at
// most 1024). Every thread gets the result.
#pragma once

#include <cfloat>

namespace deepinfer::cuda {

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// `scratch` holds 32 floats of shared memory; the call ends with a barrier so it can be reused.
__device__ inline float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = lane < warps ? scratch[lane] : 0.0f;
  r = warp_sum(r);
  __syncthreads();
  return r;
}

__device__ inline float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = lane < warps ? scratch[lane] : -FLT_MAX;
  r = warp_max(r);
  __syncthreads();
  return r;
}

}  // namespace deepinfer::cuda

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/sampling/argmax.h"

namespace deepinfer::cuda {
namespace {

__device__ inline bool better(float v, int i, float bv, int bi) {
  return v > bv || (v == bv && i < bi);  // NaN compares false: never better
}

__global__ void argmax_kernel(const float* logits, int64_t vocab, int32_t* out) {
  pdl_grid_begin();
  __shared__ float vals[32];
  __shared__ int idxs[32];
  const float* row = logits + blockIdx.x * vocab;
  float bv = -INFINITY;
  int bi = 0x7fffffff;
  const auto take = [&](float v, int64_t i) {
    if (better(v, static_cast<int>(i), bv, bi)) bv = v, bi = static_cast<int>(i);
  };
  // `better` is a total order (value, then the lower id), so the visiting order does not change
  // the pick. Rows of a multiple of 4 go kLoads float4s a thread at a time, all in flight
  // together: one load a step left a 129k vocab bound by the memory's latency (50 us at B=1).
  if (vocab % 4 == 0) {
    constexpr int kLoads = 4;
    const float4* row4 = reinterpret_cast<const float4*>(row);
    const int64_t n4 = vocab / 4, stride = int64_t{blockDim.x} * kLoads;
    int64_t j = threadIdx.x;
    for (; j + (kLoads - 1) * blockDim.x < n4; j += stride) {
      float4 v[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) v[u] = row4[j + u * blockDim.x];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int64_t b = 4 * (j + u * blockDim.x);
        take(v[u].x, b);
        take(v[u].y, b + 1);
        take(v[u].z, b + 2);
        take(v[u].w, b + 3);
      }
    }
    for (; j < n4; j += blockDim.x) {
      const float4 v = row4[j];
      take(v.x, 4 * j);
      take(v.y, 4 * j + 1);
      take(v.z, 4 * j + 2);
      take(v.w, 4 * j + 3);
    }
  } else {
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) take(row[i], i);
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (better(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) vals[warp] = bv, idxs[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w)
      if (better(vals[w], idxs[w], bv, bi)) bv = vals[w], bi = idxs[w];
    out[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;  // an all-NaN row: token 0
  }
}

}  // namespace

void argmax_rows(const float* logits, int64_t rows, int64_t vocab, int32_t* out,
                 cudaStream_t stream) {
  if (rows == 0) return;
  launch_kernel(argmax_kernel, static_cast<unsigned>(rows), 1024, 0, stream, logits, vocab, out);
}

}  // namespace deepinfer::cuda

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/sampling/argmax.h"

namespace deepinfer::cuda {
namespace {

__device__ inline bool better(float v, int i, float bv, int bi) {
  return v > bv || (v == bv && i < bi);  // NaN compares false: never better
}

__global__ void argmax_kernel(const float* logits, int64_t vocab, int32_t* out) {
  __shared__ float vals[32];
  __shared__ int idxs[32];
  const float* row = logits + blockIdx.x * vocab;
  float bv = -INFINITY;
  int bi = 0x7fffffff;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x)
    if (better(row[i], static_cast<int>(i), bv, bi)) bv = row[i], bi = static_cast<int>(i);
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
  argmax_kernel<<<static_cast<unsigned>(rows), 1024, 0, stream>>>(logits, vocab, out);
  DI_CUDA_LAUNCH_CHECK();
}

}  // namespace deepinfer::cuda

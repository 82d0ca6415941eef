#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/norm/rms_norm.h"
#include "deepinfer/backend/cuda/reduce.cuh"

namespace deepinfer::cuda {
namespace {

__global__ void rms_norm_kernel(const float* x, const float* w, int64_t d, float eps, float* y) {
  __shared__ float scratch[32];
  const float* xr = x + blockIdx.x * d;
  float* yr = y + blockIdx.x * d;
  float ss = 0;
  // An explicit FMA: the decode compressor normalizes its entries with the same sum.
  // Unrolled so that a thread's loads are in flight together (decode normalizes one row a
  // block); the chain keeps its order.
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) ss = __fmaf_rn(xr[i], xr[i], ss);
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) yr[i] = xr[i] * inv * (w ? w[i] : 1.0f);
}

}  // namespace

void rms_norm(const float* x, const float* weight, int64_t rows, int64_t d, float eps, float* y,
              cudaStream_t stream) {
  if (rows == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(x, weight, d, eps, y);
  DI_CUDA_LAUNCH_CHECK();
}

}  // namespace deepinfer::cuda

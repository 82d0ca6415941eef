#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/norm/rms_norm.h"
#include "deepinfer/backend/cuda/norm/rms_norm_row.cuh"
#include "deepinfer/backend/cuda/reduce.cuh"

namespace deepinfer::cuda {
namespace {

__global__ void rms_norm_kernel(const float* x, const float* w, int64_t d, float eps, float* y) {
  pdl_grid_begin();
  __shared__ float scratch[32];
  rms_norm_row(x + blockIdx.x * d, w, d, eps, y + blockIdx.x * d, scratch);
}

constexpr int kRowsPerBlock = 8;

__global__ void rms_norm_rows_kernel(const float* x, int64_t rows, int64_t d, float eps, float* y) {
  pdl_grid_begin();
  const int64_t row = blockIdx.x * int64_t{kRowsPerBlock} + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  const float* xr = x + row * d;
  float* yr = y + row * d;
  float ss = 0;
  if (d % 4 == 0) {  // rows 16-byte aligned: a lane's 4 consecutive values a load
    const float4* x4 = reinterpret_cast<const float4*>(xr);
#pragma unroll 4
    for (int64_t i = lane; i < d / 4; i += 32) {
      const float4 v = x4[i];
      ss = __fmaf_rn(v.x, v.x, ss);
      ss = __fmaf_rn(v.y, v.y, ss);
      ss = __fmaf_rn(v.z, v.z, ss);
      ss = __fmaf_rn(v.w, v.w, ss);
    }
    const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(d) + eps);
    float4* y4 = reinterpret_cast<float4*>(yr);
    for (int64_t i = lane; i < d / 4; i += 32) {
      const float4 v = x4[i];
      y4[i] = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
    }
    return;
  }
  for (int64_t i = lane; i < d; i += 32) ss = __fmaf_rn(xr[i], xr[i], ss);
  const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(d) + eps);
  for (int64_t i = lane; i < d; i += 32) yr[i] = xr[i] * inv;
}

}  // namespace

void rms_norm_rows(const float* x, int64_t rows, int64_t d, float eps, float* y,
                   cudaStream_t stream) {
  if (rows == 0) return;
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  launch_kernel(rms_norm_rows_kernel, static_cast<unsigned>(blocks), 32 * kRowsPerBlock, 0, stream,
                x, rows, d, eps, y);
}

void rms_norm(const float* x, const float* weight, int64_t rows, int64_t d, float eps, float* y,
              cudaStream_t stream) {
  if (rows == 0) return;
  launch_kernel(rms_norm_kernel, static_cast<unsigned>(rows), 256, 0, stream, x, weight, d, eps, y);
}

}  // namespace deepinfer::cuda

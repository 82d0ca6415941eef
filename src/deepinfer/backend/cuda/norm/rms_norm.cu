#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/norm/rms_norm.h"
#include "deepinfer/backend/cuda/norm/rms_norm_row.cuh"
#include "deepinfer/backend/cuda/reduce.cuh"

namespace deepinfer::cuda {
namespace {

template <typename Out>
__global__ void rms_norm_kernel(const float* x, const float* w, int64_t d, float eps, Out* y) {
  // Weights, beside the kernel ahead (decode: one row).
  const auto wv = pdl_grid_begin([&] { return preload_norm_weights(w, d); });
  __shared__ float scratch[32];
  rms_norm_row(x + blockIdx.x * d, wv.v, w, d, eps, y + blockIdx.x * d, scratch);
}

constexpr int kRowsPerBlock = 8;

__global__ void rms_norm_rows_kernel(const float* x, int64_t rows, int64_t d, float eps, float* y) {
  pdl_grid_begin();
  const int64_t row = blockIdx.x * int64_t{kRowsPerBlock} + (threadIdx.x >> 5);
  if (row >= rows) return;
  rms_norm_row_warp(x + row * d, d, eps, y + row * d);
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
  launch_kernel(rms_norm_kernel<float>, static_cast<unsigned>(rows), kNormBlock, 0, stream, x,
                weight, d, eps, y);
}

void rms_norm(const float* x, const float* weight, int64_t rows, int64_t d, float eps,
              __nv_bfloat16* y, cudaStream_t stream) {
  if (rows == 0) return;
  launch_kernel(rms_norm_kernel<__nv_bfloat16>, static_cast<unsigned>(rows), kNormBlock, 0, stream,
                x, weight, d, eps, y);
}

}  // namespace deepinfer::cuda

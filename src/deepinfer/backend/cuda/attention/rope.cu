#include "deepinfer/backend/cuda/attention/rope.h"
#include "deepinfer/backend/cuda/attention/rope_pair.cuh"
#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"

namespace deepinfer::cuda {
namespace {

__global__ void rope_kernel(float* x, int64_t rows, int64_t stride, int half, int rows_per_pos,
                            const int64_t* positions, const double* inv_freq, bool inverse) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= rows * half) return;
  const int64_t r = i / half;
  const int k = static_cast<int>(i % half);
  float c, s;
  rope_cos_sin(positions[r / rows_per_pos], inv_freq[k], inverse, &c, &s);
  rotate_pair(x + r * stride + 2 * k, c, s);
}

}  // namespace

void rope(float* x, int64_t rows, int64_t row_stride, int rope_dim, int rows_per_pos,
          const int64_t* positions, const double* inv_freq, bool inverse, cudaStream_t stream) {
  const int64_t work = rows * (rope_dim / 2);
  if (work == 0) return;
  launch_kernel(rope_kernel, static_cast<unsigned>((work + 255) / 256), 256, 0, stream, x, rows,
                row_stride, rope_dim / 2, rows_per_pos, positions, inv_freq, inverse);
}

}  // namespace deepinfer::cuda

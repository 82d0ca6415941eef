#include "deepinfer/backend/cuda/compressor/compressor_pool.h"
#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"

namespace deepinfer::cuda {
namespace {

__global__ void pool_kernel(const float* kv, const float* gate, int64_t windows, int rows, int dim,
                            float* out) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= windows * dim) return;
  const int64_t w = i / dim;
  const int c = static_cast<int>(i % dim);
  const float* g = gate + w * rows * dim + c;
  const float* v = kv + w * rows * dim + c;
  float mx = -INFINITY;
  for (int j = 0; j < rows; ++j) mx = fmaxf(mx, g[int64_t{j} * dim]);
  float den = 0, num = 0;
  for (int j = 0; j < rows; ++j) {
    const float e = expf(g[int64_t{j} * dim] - mx);
    // Explicit roundings: the decode compressor (runtime/cuda/forward/decode_kernels.cu) pools
    // the same slots and must give the same bits whatever the compiler contracts.
    den = __fadd_rn(den, e);
    num = __fmaf_rn(e, v[int64_t{j} * dim], num);
  }
  out[i] = num / den;
}

}  // namespace

void compressor_pool(const float* kv, const float* gate, int64_t windows, int rows, int dim,
                     float* out, cudaStream_t stream) {
  const int64_t work = windows * dim;
  if (work == 0) return;
  launch_kernel(pool_kernel, static_cast<unsigned>((work + 255) / 256), 256, 0, stream, kv, gate,
                windows, rows, dim, out);
}

}  // namespace deepinfer::cuda

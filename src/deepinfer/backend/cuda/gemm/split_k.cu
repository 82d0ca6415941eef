#include <algorithm>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/gemm/split_k.h"
#include "deepinfer/backend/cuda/launch.cuh"

namespace deepinfer::cuda {
namespace {

__global__ void sum_splits_kernel(const float* partials, int splits, int64_t count, float* y) {
  pdl_grid_begin();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    float s = partials[i];
    for (int z = 1; z < splits; ++z) s += partials[z * count + i];
    y[i] = s;
  }
}

}  // namespace

int device_sms() {
  static const int sms = [] {
    int dev = 0, n = 0;
    DI_CUDA_CHECK(cudaGetDevice(&dev));
    DI_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  return sms;
}

int k_splits(int64_t blocks, int64_t want, int64_t tiles, int64_t n, int64_t cols,
             const float* partials, int64_t partial_floats, bool within_wave) {
  if (partials == nullptr || blocks >= want) return 1;
  const int64_t fill = within_wave ? want / blocks : (want + blocks - 1) / blocks;
  int64_t splits = std::min(fill, tiles / 2);
  while (splits > 1 && splits * n * cols > partial_floats) --splits;
  return static_cast<int>(std::max<int64_t>(splits, 1));
}

void sum_splits(const float* partials, int splits, int64_t count, float* y, cudaStream_t stream) {
  const int grid = static_cast<int>(std::min<int64_t>((count + 255) / 256, 4 * device_sms()));
  launch_kernel(sum_splits_kernel, grid, 256, 0, stream, partials, splits, count, y);
}

}  // namespace deepinfer::cuda

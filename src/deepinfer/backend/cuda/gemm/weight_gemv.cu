#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/gemm/weight_gemv.h"
#include "deepinfer/backend/cuda/quant/weight_rows.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kRows = 8;  // rows of x per pass over a weight row: the accumulators a lane holds

template <MatrixFormat F>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(DeviceMatrix w, const __nv_bfloat16* x, int64_t n, float* y) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t col = int64_t{blockIdx.x} * kWarps + warp;
  if (col >= w.rows) return;
  const weight_rows::Row row[1] = {weight_rows::row_of(w, col)};
  for (int64_t r0 = 0; r0 < n; r0 += kRows) {
    const int rn = n - r0 < kRows ? static_cast<int>(n - r0) : kRows;
    float acc[1][kRows];
    weight_rows::dot_rows<F, 1, kRows>(row, x + r0 * w.cols, w.cols, w.cols, rn, acc);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (r < rn && lane == r) y[(r0 + r) * w.rows + col] = acc[0][r];
  }
}

}  // namespace

bool weight_gemv_supports(const DeviceMatrix& w) { return w.reads_in_vectors(); }

void weight_gemv(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t n, float* y,
                 cudaStream_t stream) {
  if (!weight_gemv_supports(w) || reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    std::fprintf(stderr, "weight_gemv: unsupported operands (cols %lld, format %d)\n",
                 static_cast<long long>(w.cols), static_cast<int>(w.format));
    std::abort();
  }
  if (n == 0 || w.rows == 0) return;
  const unsigned blocks = static_cast<unsigned>((w.rows + kWarps - 1) / kWarps);
  switch (w.format) {
    case MatrixFormat::kBf16:
      gemv_kernel<MatrixFormat::kBf16><<<blocks, kWarps * 32, 0, stream>>>(w, x, n, y);
      break;
    case MatrixFormat::kFp8Block:
      gemv_kernel<MatrixFormat::kFp8Block><<<blocks, kWarps * 32, 0, stream>>>(w, x, n, y);
      break;
    case MatrixFormat::kMxfp4:
      gemv_kernel<MatrixFormat::kMxfp4><<<blocks, kWarps * 32, 0, stream>>>(w, x, n, y);
      break;
  }
  DI_CUDA_LAUNCH_CHECK();
}

}  // namespace deepinfer::cuda

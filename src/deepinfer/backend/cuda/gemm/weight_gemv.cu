#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/gemm/weight_gemv.h"
#include "deepinfer/backend/cuda/quant/weight_rows.cuh"
#include "deepinfer/backend/cuda/reduce.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kRows = 8;  // rows of x per pass over a weight row: the accumulators a lane holds

// Output column c belongs to group c / (w.rows / groups), which reads x's columns [g * w.cols,
// (g + 1) * w.cols) of rows ldx apart; y is [n, w.rows]. One group: a plain projection.
template <MatrixFormat F>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(DeviceMatrix w, const __nv_bfloat16* x, int64_t ldx, int groups, int64_t n,
                float* y) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t col = int64_t{blockIdx.x} * kWarps + warp;
  if (col >= w.rows) return;
  const weight_rows::Row row[1] = {weight_rows::row_of(w, col)};
  const __nv_bfloat16* xg = x + (col / (w.rows / groups)) * w.cols;
  for (int64_t r0 = 0; r0 < n; r0 += kRows) {
    const int rn = n - r0 < kRows ? static_cast<int>(n - r0) : kRows;
    float acc[1][kRows];
    weight_rows::dot_rows<F, 1, kRows>(row, xg + r0 * ldx, ldx, w.cols, rn, acc);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (r < rn && lane == r) y[(r0 + r) * w.rows + col] = acc[0][r];
  }
}

// fp32 [n, in] x [out, in]^T, a warp per output column; each lane sums its k (lane, lane + 32,
// ...) in order, then the warp's butterfly: the same for a row in any n.
__global__ void __launch_bounds__(kWarps * 32)
    f32_kernel(const float* w, const float* x, int64_t n, int64_t out, int64_t in, float* y) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t col = int64_t{blockIdx.x} * kWarps + warp;
  if (col >= out) return;
  const float* wr = w + col * in;
  for (int64_t r0 = 0; r0 < n; r0 += kRows) {
    const int rn = n - r0 < kRows ? static_cast<int>(n - r0) : kRows;
    float acc[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;
    for (int64_t k = lane; k < in; k += 32) {
      const float wv = __ldg(wr + k);
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        if (r < rn) acc[r] = fmaf(wv, x[(r0 + r) * in + k], acc[r]);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float v = warp_reduce(acc[r], SumOp{});
      if (r < rn && lane == 0) y[(r0 + r) * out + col] = v;
    }
  }
}

void launch(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t ldx, int groups, int64_t n,
            float* y, cudaStream_t stream) {
  if (!weight_gemv_supports(w) || reinterpret_cast<uintptr_t>(x) % 16 != 0 || ldx % 8 != 0 ||
      groups < 1 || w.rows % groups != 0) {
    std::fprintf(stderr,
                 "weight_gemv: unsupported operands (rows %lld, cols %lld, format %d, %d groups, "
                 "ldx %lld)\n",
                 static_cast<long long>(w.rows), static_cast<long long>(w.cols),
                 static_cast<int>(w.format), groups, static_cast<long long>(ldx));
    std::abort();
  }
  if (n == 0 || w.rows == 0) return;
  const unsigned blocks = static_cast<unsigned>((w.rows + kWarps - 1) / kWarps);
  switch (w.format) {
    case MatrixFormat::kBf16:
      gemv_kernel<MatrixFormat::kBf16><<<blocks, kWarps * 32, 0, stream>>>(w, x, ldx, groups, n, y);
      break;
    case MatrixFormat::kFp8Block:
      gemv_kernel<MatrixFormat::kFp8Block>
          <<<blocks, kWarps * 32, 0, stream>>>(w, x, ldx, groups, n, y);
      break;
    case MatrixFormat::kMxfp4:
      gemv_kernel<MatrixFormat::kMxfp4>
          <<<blocks, kWarps * 32, 0, stream>>>(w, x, ldx, groups, n, y);
      break;
  }
  DI_CUDA_LAUNCH_CHECK();
}

}  // namespace

bool weight_gemv_supports(const DeviceMatrix& w) { return w.reads_in_vectors(); }

void weight_gemv(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t n, float* y,
                 cudaStream_t stream) {
  launch(w, x, w.cols, 1, n, y, stream);
}

void f32_gemv(const float* w, const float* x, int64_t n, int64_t out, int64_t in, float* y,
              cudaStream_t stream) {
  if (n == 0 || out == 0) return;
  const unsigned blocks = static_cast<unsigned>((out + kWarps - 1) / kWarps);
  f32_kernel<<<blocks, kWarps * 32, 0, stream>>>(w, x, n, out, in, y);
  DI_CUDA_LAUNCH_CHECK();
}

void weight_gemv_grouped(const DeviceMatrix& w, int groups, const __nv_bfloat16* x, int64_t n,
                         float* y, cudaStream_t stream) {
  launch(w, x, int64_t{groups} * w.cols, groups, n, y, stream);
}

}  // namespace deepinfer::cuda

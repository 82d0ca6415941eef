#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/gemm/weight_gemv.h"
#include "deepinfer/backend/cuda/quant/weight_rows.cuh"
#include "deepinfer/backend/cuda/reduce.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kRows = weight_rows::kMaxRowsPerPass;  // rows of x per pass, at most
using weight_rows::rows_per_pass;

// Output column c belongs to group c / (w.rows / groups), which reads x's columns [g * w.cols,
// (g + 1) * w.cols) of rows ldx apart; y is [n, w.rows]. One group: a plain projection. A warp
// owns C adjacent columns (C = 2 at decode's one or two rows: twice the weight bytes in flight
// a warp, where a short row such as K = 1024 in FP8 is only two loads a lane); a pair never
// straddles a group.
template <MatrixFormat F, int R, int C>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(DeviceMatrix w, const __nv_bfloat16* x, int64_t ldx, int groups, int64_t n,
                float* y) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t col = (int64_t{blockIdx.x} * kWarps + warp) * C;
  if (col >= w.rows) return;
  weight_rows::Row row[C];
#pragma unroll
  for (int c = 0; c < C; ++c) row[c] = weight_rows::row_of(w, min(col + c, w.rows - 1));
  const __nv_bfloat16* xg = x + (col / (w.rows / groups)) * w.cols;
  for (int64_t r0 = 0; r0 < n; r0 += R) {
    const int rn = n - r0 < R ? static_cast<int>(n - r0) : R;
    float acc[C][R];
    weight_rows::dot_rows<F, C, R>(row, xg + r0 * ldx, ldx, w.cols, rn, acc);
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (r < rn && lane == r && col + c < w.rows) y[(r0 + r) * w.rows + col + c] = acc[c][r];
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

template <int R, int C>
void launch_format(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t ldx, int groups,
                   int64_t n, float* y, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((w.rows + kWarps * C - 1) / (kWarps * C));
  switch (w.format) {
    case MatrixFormat::kBf16:
      gemv_kernel<MatrixFormat::kBf16, R, C>
          <<<blocks, kWarps * 32, 0, stream>>>(w, x, ldx, groups, n, y);
      break;
    case MatrixFormat::kFp8Block:
      gemv_kernel<MatrixFormat::kFp8Block, R, C>
          <<<blocks, kWarps * 32, 0, stream>>>(w, x, ldx, groups, n, y);
      break;
    case MatrixFormat::kMxfp4:
      gemv_kernel<MatrixFormat::kMxfp4, R, C>
          <<<blocks, kWarps * 32, 0, stream>>>(w, x, ldx, groups, n, y);
      break;
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
  const bool pairs = (w.rows / groups) % 2 == 0;
  switch (rows_per_pass(n)) {
    case 1:
      pairs ? launch_format<1, 2>(w, x, ldx, groups, n, y, stream)
            : launch_format<1, 1>(w, x, ldx, groups, n, y, stream);
      break;
    case 2:
      pairs ? launch_format<2, 2>(w, x, ldx, groups, n, y, stream)
            : launch_format<2, 1>(w, x, ldx, groups, n, y, stream);
      break;
    case 4:
      launch_format<4, 1>(w, x, ldx, groups, n, y, stream);
      break;
    default:
      launch_format<kRows, 1>(w, x, ldx, groups, n, y, stream);
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

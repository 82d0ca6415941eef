#include <cstdio>
#include <cstdlib>

#include "deepinfer/backend/cuda/gemm/fp8_mma.h"
#include "deepinfer/backend/cuda/gemm/fp8_wgmma.h"
#include "deepinfer/backend/cuda/gemm/linear.h"
#include "deepinfer/backend/cuda/gemm/weight_gemv.h"
#include "deepinfer/backend/cuda/quant/dequantize.h"

namespace deepinfer::cuda {

namespace {
// Small bf16 matrices take weight_gemv at decode: one launch where cuBLASLt ran a split-K GEMM
// and its reduction. The head (129280 x 4096) stays on cuBLASLt, which reads it at its floor.
#ifndef LINEAR_BF16_GEMV_MAX_ELEMS
#define LINEAR_BF16_GEMV_MAX_ELEMS (int64_t{1} << 24)
#endif
constexpr int64_t kBf16GemvMaxElems = LINEAR_BF16_GEMV_MAX_ELEMS;
}  // namespace

Linear::Linear(Gemm& gemm) : gemm_(gemm) { prepare_dequantize(); }

void Linear::reserve(int64_t elems) {
  if (static_cast<int64_t>(scratch_.size()) < elems) scratch_ = DeviceBuffer<__nv_bfloat16>(elems);
}

bool Linear::takes_gemv(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t n) const {
  // Batch-invariant: one kernel for every n (Gemm's comment), so a row's sums never change.
  if (gemm_.batch_invariant()) return w.format != MatrixFormat::kBf16;
  if (w.format == MatrixFormat::kBf16 && w.rows * w.cols > kBf16GemvMaxElems) return false;
  return n <= kGemvMaxRows && weight_gemv_supports(w) && reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

void Linear::run(const DeviceMatrix& w, const __nv_bfloat16* x, float* y, int64_t n,
                 cudaStream_t stream) {
  if (n == 0 || w.rows == 0) return;
  if (takes_gemv(w, x, n)) {
    weight_gemv(w, x, n, y, stream);
    return;
  }
  if (w.format == MatrixFormat::kBf16) {
    gemm_.bf16(static_cast<const __nv_bfloat16*>(w.data), x, y, n, w.rows, w.cols, stream);
    return;
  }
  if (takes_wgmma(w, 1, x, y, n)) {
    fp8_wgmma(w, 1, x, n, y, partials(), partial_floats(), stream);
    return;
  }
  if (n <= kMmaMaxRows && fp8_mma_supports(w) && reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    fp8_mma(w, x, n, y, partials(), partial_floats(), stream);
    return;
  }
  if (static_cast<int64_t>(scratch_.size()) < w.rows * w.cols) {
    std::fprintf(stderr,
                 "Linear: a %lld x %lld quantized matrix over %lld rows needs %lld scratch "
                 "elements, reserve() made %zu\n",
                 static_cast<long long>(w.rows), static_cast<long long>(w.cols),
                 static_cast<long long>(n), static_cast<long long>(w.rows * w.cols),
                 scratch_.size());
    std::abort();
  }
  dequantize(w, scratch_.get(), stream);
  gemm_.bf16(scratch_.get(), x, y, n, w.rows, w.cols, stream);
}

bool Linear::wgmma_fits(const DeviceMatrix& w, int groups, int64_t n) const {
  return !gemm_.batch_invariant() && n >= kWgmmaMinRows && n <= kWgmmaMaxRows &&
         fp8_wgmma_supports(w, groups);
}

bool Linear::takes_wgmma(const DeviceMatrix& w, int groups, const __nv_bfloat16* x, const float* y,
                         int64_t n) const {
  return wgmma_fits(w, groups, n) && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(y) % 16 == 0;
}

bool Linear::grouped_fits(const DeviceMatrix& w, int groups, int64_t n) const {
  if (w.format == MatrixFormat::kBf16) return false;
  if (n <= kGemvMaxRows) return weight_gemv_supports(w);
  if (gemm_.batch_invariant()) return false;
  return (n <= kMmaMaxRows && fp8_mma_grouped_supports(w, groups)) || wgmma_fits(w, groups, n);
}

void Linear::run_grouped(const DeviceMatrix& w, int groups, const __nv_bfloat16* x, float* y,
                         int64_t n, cudaStream_t stream) {
  if (!grouped_fits(w, groups, n)) {
    std::fprintf(stderr,
                 "Linear::run_grouped: no grouped kernel takes %d groups of a %lld x %lld "
                 "matrix (format %d) over %lld rows\n",
                 groups, static_cast<long long>(w.rows), static_cast<long long>(w.cols),
                 static_cast<int>(w.format), static_cast<long long>(n));
    std::abort();
  }
  if (n <= kGemvMaxRows)
    weight_gemv_grouped(w, groups, x, n, y, stream);
  else if (takes_wgmma(w, groups, x, y, n))
    fp8_wgmma(w, groups, x, n, y, partials(), partial_floats(), stream);
  else
    fp8_mma_grouped(w, groups, x, n, y, partials(), partial_floats(), stream);
}

}  // namespace deepinfer::cuda

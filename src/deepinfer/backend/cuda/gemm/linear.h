// Projections over weights in their stored format: y[n, w.rows] = x[n, w.cols] . W^T, bf16
// activations, fp32 accumulation and output.
// - bf16 weights: cuBLASLt (Gemm::bf16); small ones over n <= kGemvMaxRows rows (decode's
//   compressor and indexer projections), weight_gemv.
// - FP8 / MXFP4 weights, n <= kGemvMaxRows (decode): weight_gemv, which reads the stored bytes.
// - FP8 weights, kWgmmaMinRows..kWgmmaMaxRows rows (larger decode batches), row blocks multiples of
//   128: fp8_wgmma, warpgroup tensor cores over the stored bytes; other FP8 ones up to
//   kMmaMaxRows rows: fp8_mma, mma.sync over the stored bytes.
// - FP8 / MXFP4 weights, more rows (prefill, large batches): the weight is dequantized into one
//   bf16 scratch matrix, then cuBLASLt; the scratch is reused in stream order by every call, so
//   the device keeps one bf16 copy of the largest matrix, not of the model.
// - In the Gemm's batch-invariant mode: weight_gemv (or Gemm's own invariant kernel for bf16) for
//   every n.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/gemm/gemm.h"
#include "deepinfer/backend/cuda/quant/device_matrix.h"

namespace deepinfer::cuda {

// Not thread-safe: one per stream, like Gemm.
class Linear {
 public:
  static constexpr int64_t kGemvMaxRows = 16;
#ifndef FP8_MMA_MAX_ROWS
#define FP8_MMA_MAX_ROWS 128
#endif
  static constexpr int64_t kMmaMaxRows = FP8_MMA_MAX_ROWS;
  // FP8 matrices whose row blocks are multiples of 128 take fp8_wgmma over this many rows of x
  // (variants A/B the bounds: scripts/build_gpu_variants.sh). On an H100 (docs/gpu_fp8_wgmma/)
  // fp8_mma stayed ahead at B=32 (7.82 against 7.99 ms a step) and fp8_wgmma won at B=128
  // (13.01 against 13.41); in prefill cuBLASLt on the dequantized copy did (102.4 against 118.5).
#ifndef FP8_WGMMA_MIN_ROWS
#define FP8_WGMMA_MIN_ROWS 65
#endif
#ifndef FP8_WGMMA_MAX_ROWS
#define FP8_WGMMA_MAX_ROWS 128
#endif
  static constexpr int64_t kWgmmaMinRows = FP8_WGMMA_MIN_ROWS, kWgmmaMaxRows = FP8_WGMMA_MAX_ROWS;
  // Whether run() takes weight_gemv for w over n rows of x (bf16 ones only while small: linear.cu).
  bool takes_gemv(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t n) const;
  // Whether run() (groups == 1) or run_grouped() takes fp8_wgmma for w over n rows into y.
  bool takes_wgmma(const DeviceMatrix& w, int groups, const __nv_bfloat16* x, const float* y,
                   int64_t n) const;

  explicit Linear(Gemm& gemm);
  Gemm& gemm() { return gemm_; }

  // The dequantization scratch, for quantized matrices of up to `elems` elements. It only grows,
  // and only here: call it (at load) before capturing a graph that runs a quantized matrix with
  // more than kGemvMaxRows rows. run() aborts if the scratch is too small.
  void reserve(int64_t elems);

  void run(const DeviceMatrix& w, const __nv_bfloat16* x, float* y, int64_t n, cudaStream_t stream);

  // The grouped form (the attention's wo_a; weight_gemv_grouped's contract): W's rows in `groups`
  // equal blocks, block g over x's columns [g * w.cols, (g + 1) * w.cols), x [n, groups * w.cols]
  // (16-byte aligned) -> y [n, w.rows], one launch. grouped_fits: whether a kernel takes it
  // (weight_gemv_grouped up to kGemvMaxRows, then fp8_wgmma or fp8_mma); else the caller runs
  // each group's row block through run(). run_grouped aborts where !grouped_fits.
  bool grouped_fits(const DeviceMatrix& w, int groups, int64_t n) const;
  void run_grouped(const DeviceMatrix& w, int groups, const __nv_bfloat16* x, float* y, int64_t n,
                   cudaStream_t stream);

 private:
  // fp8_wgmma's bounds, invariance and shapes, without the pointers' alignment.
  bool wgmma_fits(const DeviceMatrix& w, int groups, int64_t n) const;
  // The dequantization scratch (rows * cols bf16) holds the tensor-core kernels' split-K
  // partials where they fit.
  float* partials() const { return reinterpret_cast<float*>(scratch_.get()); }
  int64_t partial_floats() const { return static_cast<int64_t>(scratch_.size()) / 2; }
  Gemm& gemm_;
  DeviceBuffer<__nv_bfloat16> scratch_;
};

}  // namespace deepinfer::cuda

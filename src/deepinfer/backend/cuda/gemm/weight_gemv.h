// y[n, w.rows] = x[n, w.cols] . W^T for a few rows n, reading W in its stored format (bf16, FP8
// block-scaled, MXFP4) and expanding it in registers: decode is bound by reading the weights, so
// a quantized weight costs its stored bytes, not a bf16 copy's. One warp per output column, each
// weight row read once per 8 rows of x (x is small and stays in L1). fp32 accumulation and output.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "deepinfer/backend/cuda/quant/device_matrix.h"

namespace deepinfer::cuda {

// Which kernel forms the sums: kAuto picks; the others are for tests. kWarpPerColumn and kStream
// give the same bits.
//   kWarpPerColumn: a warp per one or two columns, its rows' words loaded into registers;
//   kStream: a grid that stays, each warp streaming its columns' rows through shared memory
//     (gemm/gemv_stream.h); aborts where it does not fit.
//   kMma: FP8 on tensor cores (gemm/fp8_gemv_mma.h): other bits (the block scale multiplies each
//     128-k chunk's sum), the same for a row in any n; aborts where it does not fit.
enum class GemvKernel { kAuto, kWarpPerColumn, kStream, kMma };

// Whether weight_gemv takes w: DeviceMatrix::reads_in_vectors().
bool weight_gemv_supports(const DeviceMatrix& w);

// x: bf16 [n, w.cols], 16-byte aligned; y: fp32 [n, w.rows]. Aborts when !weight_gemv_supports(w).
void weight_gemv(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t n, float* y,
                 cudaStream_t stream, GemvKernel kernel = GemvKernel::kAuto);

// y[n, out] = x[n, in] . W^T with fp32 W [out, in], x and math: one warp per output column, lanes
// over k, a fixed order of sums per row (batch-invariant mode's router, Gemm::f32).
void f32_gemv(const float* w, const float* x, int64_t n, int64_t out, int64_t in, float* y,
              cudaStream_t stream);

// A block-diagonal projection in one launch: w's rows split into `groups` equal blocks, block g
// multiplying x's columns [g * w.cols, (g + 1) * w.cols). x: bf16 [n, groups * w.cols]; y: fp32
// [n, w.rows] (the groups' outputs side by side). Each column's sum is the one weight_gemv forms
// over that group's slice alone.
void weight_gemv_grouped(const DeviceMatrix& w, int groups, const __nv_bfloat16* x, int64_t n,
                         float* y, cudaStream_t stream, GemvKernel kernel = GemvKernel::kAuto);

}  // namespace deepinfer::cuda

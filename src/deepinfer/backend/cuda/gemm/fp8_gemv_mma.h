// Private to gemm/ (and its op tests): decode's FP8 projection on tensor cores, for weight_gemv.
// y[n, w.rows] = x . W^T over FP8 block-scaled weights, the weights the mma's A operand (16 of
// W's rows a warp) and 8 rows of x its B (n8), or 16 as two tiles where K <= 4096, so one
// token costs what eight do and a pass's expansion serves 16. A chunk
// of 128 k at a time: its mma chain from zero, then times the chunk's block scale, added to the
// row's sum in k order; a row's sum is the same bits for any n and any rows beside it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "deepinfer/backend/cuda/quant/device_matrix.h"

namespace deepinfer::cuda {

// Whether fp8_gemv_mma takes w in `groups` row blocks: FP8 block-scaled, cols a multiple of 128,
// block_cols 128 (V4's blocks), or 32 or 64 (V4.1's) where w.pow2_scales (each lane's scale then
// goes into its exact bf16 multiply), rows % groups == 0 and (groups > 1) each group's rows a
// multiple of the rows a block takes.
bool fp8_gemv_mma_supports(const DeviceMatrix& w, int groups);

// y [n, w.rows] = x . W^T with W's rows in `groups` equal blocks, block g over x's columns
// [g * w.cols, (g + 1) * w.cols) (weight_gemv_grouped's contract; 1: a plain projection); x's
// rows ldx apart (a multiple of 8), 16-byte aligned. Aborts when !fp8_gemv_mma_supports.
void fp8_gemv_mma(const DeviceMatrix& w, int groups, const __nv_bfloat16* x, int64_t ldx, int64_t n,
                  float* y, cudaStream_t stream);

}  // namespace deepinfer::cuda

// y[n, w.rows] = x[n, w.cols] . W^T for an FP8 block-scaled W on tensor cores (W8A16), for the
// row counts between weight_gemv's few and a prefill chunk (decode batches of 17 to a few
// hundred): each weight byte is read once from memory and expanded in registers to the bf16 value
// the dequantizer writes (E4M3 times its block scale, rounded to bf16), straight into mma.sync
// fragments, so a batch of 128 reads the stored 1 byte a weight instead of dequantize-then-
// cuBLASLt's 5 (read, write and reread a bf16 copy). fp32 accumulation and output; the same
// products as that path, in another order of the fp32 sums.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "deepinfer/backend/cuda/quant/device_matrix.h"

namespace deepinfer::cuda {

// Whether fp8_mma takes w: FP8 block-scaled, cols a multiple of 128, block_cols of 32, 16-byte
// aligned data.
bool fp8_mma_supports(const DeviceMatrix& w);

// x: bf16 [n, w.cols], 16-byte aligned; y: fp32 [n, w.rows]. Too few blocks for the device (a
// narrow W, few rows) split K over the grid: each split's sums go to `partials` (fp32 scratch
// of partial_floats, null for none) and one more kernel adds them in split order, so the result
// is deterministic; a split is used only where its partials fit. Aborts when !fp8_mma_supports.
void fp8_mma(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t n, float* y, float* partials,
             int64_t partial_floats, cudaStream_t stream);

// The grouped form (the attention's output projection, wo_a): W's rows are `groups` equal blocks,
// block g multiplying x's columns [g * w.cols, (g + 1) * w.cols) of x [n, groups * w.cols], into
// y [n, w.rows] (weight_gemv_grouped's layout). Needs each block's rows a multiple of 128.
bool fp8_mma_grouped_supports(const DeviceMatrix& w, int groups);
void fp8_mma_grouped(const DeviceMatrix& w, int groups, const __nv_bfloat16* x, int64_t n, float* y,
                     float* partials, int64_t partial_floats, cudaStream_t stream);

}  // namespace deepinfer::cuda

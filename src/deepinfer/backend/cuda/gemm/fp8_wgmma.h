// y[n, w.rows] = x[n, w.cols] . W^T for an FP8 block-scaled W on warpgroup tensor cores (W8A16,
// SM90 wgmma): the batch sizes where fp8_mma's mma.sync passes leave the tensor cores idle while
// they expand weights. Each weight byte is read once from memory and expanded in registers to
// the bf16 value the dequantizer writes (E4M3 times its block scale, rounded to bf16), as wgmma's
// A fragment; the activations, up to 128 rows a pass, are B, read by the hardware from shared
// memory in their natural order. fp32 accumulation and output: fp8_mma's and the dequantize
// path's products, in another order of the fp32 sums.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "deepinfer/backend/cuda/quant/device_matrix.h"

namespace deepinfer::cuda {

// Whether fp8_wgmma takes w split into `groups` row blocks (1: a plain matrix): FP8 block-scaled,
// cols a multiple of 128, each group's rows a multiple of 128, block_cols a multiple of 32,
// 16-byte aligned data.
bool fp8_wgmma_supports(const DeviceMatrix& w, int groups);

// fp8_mma.h's contract, grouped form included (groups == 1: a plain matrix; else row block g of W
// over x's columns [g * w.cols, (g + 1) * w.cols) of x [n, groups * w.cols]). x 16-byte aligned.
// Grids short of the device's SMs split K into `partials` (fp32 scratch of partial_floats, null
// for none), summed in split order by one more launch. Aborts when !fp8_wgmma_supports.
void fp8_wgmma(const DeviceMatrix& w, int groups, const __nv_bfloat16* x, int64_t n, float* y,
               float* partials, int64_t partial_floats, cudaStream_t stream);

}  // namespace deepinfer::cuda

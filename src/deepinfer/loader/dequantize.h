// Checkpoint tensors -> fp32, row-major in their logical shape. Errors name the tensor and file.
#pragma once

#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/loader/tensor_info.h"

namespace deepinfer {

// F32, BF16 or F16 -> fp32 (numel floats). invalid_argument for any other dtype.
Status to_float(const TensorInfo& t, float* out);

// FP8 block-scaled weight (spec §3.3): w F8_E4M3 [rows, cols]; scale F8_E8M0, F32 or BF16
// [ceil(rows / block_rows), ceil(cols / block_cols)]; out[r][c] = w[r][c] * scale[r/br][c/bc].
Status dequantize_fp8_block(const TensorInfo& w, const TensorInfo& scale, int block_rows,
                            int block_cols, float* out);

// The shape and dtype checks of the two dequantizers below, without touching the data: for
// loaders that dequantize elsewhere (on the GPU).
Status check_fp8_block(const TensorInfo& w, const TensorInfo& scale, int block_rows,
                       int block_cols);
Status check_mxfp4(const TensorInfo& w, const TensorInfo& scale);

// Block scales (F8_E8M0, F32 or BF16) as fp32.
Status scales_to_float(const TensorInfo& scale, std::vector<float>* out);

// MXFP4 routed-expert weight (spec §3.4): w I8/U8 [rows, cols/2], byte c holding logical element
// 2c in its low nibble and 2c+1 in its high nibble; scale F8_E8M0 [rows, ceil(cols/32)];
// out is [rows, cols].
Status dequantize_mxfp4(const TensorInfo& w, const TensorInfo& scale, float* out);

}  // namespace deepinfer

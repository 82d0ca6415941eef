// Checkpoint weight formats -> bf16 on the device, so a quantized checkpoint is uploaded as
// stored (1 byte or half a byte per weight) instead of as host fp32. Each value is the same fp32
// product the host dequantizer (loader/dequantize.h) forms, rounded to nearest-even bf16: the
// result equals float_to_bf16 of the host's fp32 output bit for bit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "deepinfer/backend/cuda/quant/device_matrix.h"

namespace deepinfer::cuda {

// Uploads the decode tables the kernels below read (cudaMemcpyToSymbol): call once before
// capturing a CUDA graph that dequantizes; the first dequantization does it otherwise.
void prepare_dequantize();

// Any DeviceMatrix -> bf16 [rows, cols] (a bf16 matrix is copied).
void dequantize(const DeviceMatrix& w, __nv_bfloat16* out, cudaStream_t stream);

// w F8_E4M3 [rows, cols]; scale fp32 [ceil(rows / block_rows), ceil(cols / block_cols)].
void fp8_block_to_bf16(const uint8_t* w, const float* scale, int64_t rows, int64_t cols,
                       int block_rows, int block_cols, __nv_bfloat16* out, cudaStream_t stream);

// w packed FP4 [rows, cols / 2] (low nibble: the even element); scale E8M0 [rows, ceil(cols/32)].
void mxfp4_to_bf16(const uint8_t* w, const uint8_t* scale, int64_t rows, int64_t cols,
                   __nv_bfloat16* out, cudaStream_t stream);

}  // namespace deepinfer::cuda

// weight_gemv's streaming kernel (internal to gemm/): the same sums as the warp-per-column kernel,
// bit for bit, with the weight rows brought into shared memory by bulk copies many kilobytes
// ahead, and the first of them asked for before the PDL wait.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "deepinfer/backend/cuda/quant/device_matrix.h"

namespace deepinfer::cuda::gemv_detail {

// Bytes of a weight row a copy brings: a 16-byte word a lane (k splits make shares of 512).
inline constexpr int64_t kChunkBytes = 512;

// Whether the streaming kernel takes w with k split into `shares` (each share's bytes whole
// chunks, rows 16-byte multiples).
bool stream_fits(const DeviceMatrix& w, int shares);

// y[n, w.rows] = x . W^T as gemv_kernel with `shares` k splits would form it: each lane sums its
// 16-byte words of a share in k order, the warp reduces each share, the shares add in order.
// x: rows `ldx` apart, column group g = c / (w.rows / groups) reading x from g * w.cols.
void gemv_stream(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t ldx, int groups, int64_t n,
                 int shares, float* y, cudaStream_t stream);

}  // namespace deepinfer::cuda::gemv_detail

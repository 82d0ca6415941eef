// Private to gemm/: what the two tensor-core FP8 projections (fp8_mma, fp8_wgmma) share: their
// kernel arguments, and four E4M3 weight bytes times their block scale as two bf16x2 words,
// rounded as the dequantizer rounds (every E4M3 value and its fp32 product with the scale are
// what it forms).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "deepinfer/backend/cuda/mma_sync.cuh"
#include "deepinfer/backend/cuda/quant/device_matrix.h"
#include "deepinfer/backend/cuda/quant/weight_rows.cuh"

namespace deepinfer::cuda {

struct Fp8GemmArgs {
  const uint8_t* w;
  const float* scale;  // the block scales (DeviceMatrix::block_scale)
  const __nv_bfloat16* x;
  float* out;  // y, or the partials [splits][n][N]
  int64_t n, N, K, row0;
  int64_t x_stride;    // between x's rows: K, or groups * K
  int64_t group_rows;  // W's rows a group, 0: no groups
  int64_t scale_cols;
  int block_rows, block_cols, splits;
};

// y [n, w.rows] = x [n, groups * w.cols] . W^T over `groups` row blocks (1: a plain matrix); one
// split of K until the caller picks its splits.
inline Fp8GemmArgs fp8_gemm_args(const DeviceMatrix& w, int groups, const __nv_bfloat16* x,
                                 int64_t n, float* y) {
  Fp8GemmArgs a{};
  a.w = static_cast<const uint8_t*>(w.data);
  a.scale = w.block_scale;
  a.x = x;
  a.out = y;
  a.n = n;
  a.N = w.rows;
  a.K = w.cols;
  a.row0 = w.row0;
  a.x_stride = groups * w.cols;
  a.group_rows = groups > 1 ? w.rows / groups : 0;
  a.scale_cols = (w.cols + w.block_cols - 1) / w.block_cols;
  a.block_rows = w.block_rows;
  a.block_cols = w.block_cols;
  a.splits = 1;
  return a;
}

// Bytes 0, 1 -> lo; bytes 2, 3 -> hi (the lower byte in the lower half).
__device__ inline void expand_fp8x4(uint32_t w, float s, uint32_t& lo, uint32_t& hi) {
  const float2 a = weight_rows::fp8x2(w), b = weight_rows::fp8x2(w >> 16);
  lo = pack_bf16x2(a.x * s, a.y * s);
  hi = pack_bf16x2(b.x * s, b.y * s);
}

}  // namespace deepinfer::cuda

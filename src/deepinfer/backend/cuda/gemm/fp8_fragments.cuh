// Private to gemm/: four E4M3 weight bytes times their block scale as two bf16x2 words, rounded
// as the dequantizer rounds (every E4M3 value and its fp32 product with the scale are what it
// forms), for the tensor-core projections' fragments (fp8_mma, fp8_wgmma).
#pragma once

#include <cstdint>

#include "deepinfer/backend/cuda/mma_sync.cuh"
#include "deepinfer/backend/cuda/quant/weight_rows.cuh"

namespace deepinfer::cuda {

// Bytes 0, 1 -> lo; bytes 2, 3 -> hi (the lower byte in the lower half).
__device__ inline void expand_fp8x4(uint32_t w, float s, uint32_t& lo, uint32_t& hi) {
  const float2 a = weight_rows::fp8x2(w), b = weight_rows::fp8x2(w >> 16);
  lo = pack_bf16x2(a.x * s, a.y * s);
  hi = pack_bf16x2(b.x * s, b.y * s);
}

}  // namespace deepinfer::cuda

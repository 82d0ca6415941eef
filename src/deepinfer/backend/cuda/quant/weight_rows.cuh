// Device side of DeviceMatrix: a weight row read 16 bytes at a time and expanded in registers
// (bf16: 8 values, FP8 E4M3: 16, MXFP4: 32), and warp dot products of weight rows against bf16
// activation rows. Each expanded value is the fp32 product the host dequantizer forms (stored
// value times its power-of-two or fp32 scale), so a product with a bf16 activation equals the one
// over a bf16 copy of the weight: only the order of the fp32 sums differs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "deepinfer/backend/cuda/quant/device_matrix.h"
#include "deepinfer/backend/cuda/reduce.cuh"

namespace deepinfer::cuda::weight_rows {

// One weight row as the kernels address it.
struct Row {
  const uint8_t* w = nullptr;       // the row's first byte
  const float* bscale = nullptr;    // kFp8Block: the row's block-row of scales, by k / block_cols
  const uint8_t* mscale = nullptr;  // kMxfp4: the row's E8M0 scales, by k / 32
  int block_cols = 0;
  // log2(block_cols) where it is a power of two (the checkpoints' 128), else -1: the scale's
  // index is then a shift. A 64-bit division by a runtime block_cols cost each 16-byte word about
  // 25 instructions, on the path to its scale's load.
  int block_shift = -1;
};

__device__ inline Row row_of(const DeviceMatrix& m, int64_t n) {
  Row r;
  const auto* base = static_cast<const uint8_t*>(m.data);
  switch (m.format) {
    case MatrixFormat::kBf16:
      r.w = base + n * m.cols * 2;
      break;
    case MatrixFormat::kFp8Block:
      r.w = base + n * m.cols;
      r.bscale = m.block_scale +
                 ((m.row0 + n) / m.block_rows) * ((m.cols + m.block_cols - 1) / m.block_cols);
      r.block_cols = m.block_cols;
      if (m.block_cols > 0 && (m.block_cols & (m.block_cols - 1)) == 0)
        r.block_shift = __ffs(m.block_cols) - 1;
      break;
    case MatrixFormat::kMxfp4:
      r.w = base + n * (m.cols / 2);
      r.mscale = m.mx_scale + n * (m.cols / 32);
      break;
  }
  return r;
}

__device__ inline void unpack8(uint4 q, float (&f)[8]) {
  const auto* p = reinterpret_cast<const __nv_bfloat162*>(&q);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(p[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

// E8M0: 2^(b - 127); 0 is 2^-127 (a subnormal), 255 NaN (tensor/dtype.h's table).
__device__ inline float e8m0(uint8_t b) {
  if (b == 0) return __uint_as_float(0x00400000u);
  if (b == 255) return __uint_as_float(0x7fc00000u);
  return __uint_as_float(static_cast<uint32_t>(b) << 23);
}

// Two E4M3 bytes (the first in the low byte) -> two floats, by the hardware conversion (every
// E4M3 value is exact in half).
__device__ inline float2 fp8x2(uint32_t two) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xffffu), __NV_E4M3);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

// Four E2M1 nibbles (element i in bits 4i..4i+3) -> four E4M3 bytes: the magnitude code picks
// its E4M3 encoding from an 8-byte table by byte permutation, the sign moves to bit 7.
__device__ inline uint32_t fp4x4_to_fp8x4(uint32_t v) {
  // 0, 0.5, 1, 1.5 | 2, 3, 4, 6 in E4M3.
  constexpr uint32_t kLo = 0x3C383000u, kHi = 0x4C484440u;
  const uint32_t mag = __byte_perm(kLo, kHi, v & 0x7777u);
  const uint32_t s = v & 0x8888u;
  const uint32_t sign =
      ((s & 0x8u) << 4) | ((s & 0x80u) << 8) | ((s & 0x800u) << 12) | ((s & 0x8000u) << 16);
  return mag | sign;
}

// Where value k of a row starts, in bytes from the row's first.
template <MatrixFormat F>
__device__ inline int64_t byte_of(int64_t k) {
  return F == MatrixFormat::kBf16 ? 2 * k : F == MatrixFormat::kFp8Block ? k : k / 2;
}

// The raw bits of the scale that value k of the row shares (fetch's sbits).
template <MatrixFormat F>
__device__ inline uint32_t scale_bits(const Row& r, int64_t k) {
  if constexpr (F == MatrixFormat::kBf16)
    return 0;
  else if constexpr (F == MatrixFormat::kFp8Block)
    return __float_as_uint(r.bscale[r.block_shift >= 0 ? k >> r.block_shift : k / r.block_cols]);
  else
    return r.mscale[k / 32];
}

// The 16-byte word holding the row's values [k, k + per_load(F)) and the raw bits of the scale
// they share (FP8: the fp32 scale; MXFP4: the E8M0 byte; bf16: none). Nothing here waits for the
// loads, so a caller can fetch a tile ahead of expanding it.
template <MatrixFormat F>
__device__ inline void fetch(const Row& r, int64_t k, uint4* q, uint32_t* sbits) {
  *q = __ldg(reinterpret_cast<const uint4*>(r.w + byte_of<F>(k)));
  *sbits = scale_bits<F>(r, k);
}

// Values [8 * part, 8 * part + 8) of fetch()'s word and scale as floats. Expanding a word a part
// at a time lets a dot product consume each part before expanding the next: eight live floats a
// matrix instead of per_load(F) (32 for MXFP4), registers that decide a GEMV's occupancy.
template <MatrixFormat F>
__device__ inline void expand8(uint4 q, uint32_t sbits, int part, float (&f)[8]) {
  const uint32_t words[4] = {q.x, q.y, q.z, q.w};
  if constexpr (F == MatrixFormat::kBf16) {
    unpack8(q, f);
  } else if constexpr (F == MatrixFormat::kFp8Block) {
    const float s = __uint_as_float(sbits);
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      const uint32_t word = words[2 * part + w];
      const float2 a = fp8x2(word), b = fp8x2(word >> 16);
      f[4 * w] = a.x * s;
      f[4 * w + 1] = a.y * s;
      f[4 * w + 2] = b.x * s;
      f[4 * w + 3] = b.y * s;
    }
  } else {
    const float s = e8m0(static_cast<uint8_t>(sbits));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t b = fp4x4_to_fp8x4((words[part] >> (16 * h)) & 0xffffu);
      const float2 a = fp8x2(b), c = fp8x2(b >> 16);
      f[4 * h] = a.x * s;
      f[4 * h + 1] = a.y * s;
      f[4 * h + 2] = c.x * s;
      f[4 * h + 3] = c.y * s;
    }
  }
}

// fetch()'s word and scale as per_load(F) floats. An all-zero word and scale give zeros.
template <MatrixFormat F>
__device__ inline void expand(uint4 q, uint32_t sbits, float* f) {
#pragma unroll
  for (int part = 0; part < DeviceMatrix::per_load(F) / 8; ++part) {
    float t[8];
    expand8<F>(q, sbits, part, t);
#pragma unroll
    for (int i = 0; i < 8; ++i) f[8 * part + i] = t[i];
  }
}

// The row's values [k, k + per_load(F)) as floats.
template <MatrixFormat F>
__device__ inline void load(const Row& r, int64_t k, float* f) {
  uint4 q;
  uint32_t sbits;
  fetch<F>(r, k, &q, &sbits);
  expand<F>(q, sbits, f);
}

// Rows of x that a GEMV pass walks beside each weight row (dot_rows' R), for a batch of n:
// up to kMaxRowsPerPass, and below that the next power of two, since an unused row's
// accumulators cost registers and registers cost occupancy (decode is bound by the weight bytes
// in flight; the MXFP4 gate-up experts at 8 rows took 201 registers a thread, one block an SM).
// A row's sum is the same bits for any R (its own accumulator, k in order): batch invariance.
inline constexpr int kMaxRowsPerPass = 8;
inline int rows_per_pass(int64_t n) {
  return n > 4 ? kMaxRowsPerPass : n > 2 ? 4 : static_cast<int>(n);
}

// Words a lane fetches ahead in dot_rows (8 changed no step time on an H100, docs/gpu_pdl/).
inline constexpr int kAhead = 4;

// Asks L2 for the words dot_rows fetches first (this lane's first kAhead words of each row from
// k_begin): issued before a kernel's PDL wait, they arrive while the kernel ahead finishes.
template <MatrixFormat F, int NW>
__device__ inline void prefetch_first(const Row (&w)[NW], int64_t in, int64_t k_begin = 0) {
  constexpr int P = DeviceMatrix::per_load(F);
#pragma unroll
  for (int u = 0; u < kAhead; ++u) {
    const int64_t k = k_begin + (threadIdx.x & 31) * P + u * 32 * P;
    if (k >= in) break;
#pragma unroll
    for (int j = 0; j < NW; ++j)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(w[j].w + byte_of<F>(k)));
  }
}

// acc[j][r] = W_j[row] . x[r, :] for r < rn (rows of x `ldx` apart, bf16), summed over the warp
// (every lane gets it). Lanes stride over k a 16-byte load at a time; fp32 accumulation. Each lane
// fetches kAhead of its words before expanding the first, so a warp keeps kAhead * 512 bytes of
// a row in flight (one at a time left small matrices, whose few warps fill no SM, far below the
// memory bandwidth); the sums keep the order of one word after another.
// Needs in % per_load(F) == 0 and 16-byte aligned rows of both operands. k_begin (a multiple of
// per_load(F)) starts the sums there instead: a warp's share of a row split over several warps.
// FP8_WORD_SCALE 1 (a knob to time, off): an FP8 word's 16 products are summed unscaled, then
// the word's scale multiplies the sum once (one multiply a word instead of 16). Not the host
// dequantizer's per-value products, so other bits; deterministic and batch-invariant all the
// same. The streaming GEMV keeps per-value scaling, so its bit test holds only with this off.
#ifndef FP8_WORD_SCALE
#define FP8_WORD_SCALE 0
#endif
template <MatrixFormat F, int NW, int R>
__device__ inline void dot_rows(const Row (&w)[NW], const __nv_bfloat16* x, int64_t ldx, int64_t in,
                                int rn, float (&acc)[NW][R], int64_t k_begin = 0) {
  constexpr int P = DeviceMatrix::per_load(F);
  constexpr bool kWordScale = F == MatrixFormat::kFp8Block && FP8_WORD_SCALE != 0;
#pragma unroll
  for (int j = 0; j < NW; ++j)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[j][r] = 0.0f;
  for (int64_t k0 = k_begin + (threadIdx.x & 31) * P; k0 < in; k0 += kAhead * 32 * P) {
    uint4 q[kAhead][NW];
    uint32_t sb[kAhead][NW];
#pragma unroll
    for (int u = 0; u < kAhead; ++u)
#pragma unroll
      for (int j = 0; j < NW; ++j)
        if (k0 + u * 32 * P < in) fetch<F>(w[j], k0 + u * 32 * P, &q[u][j], &sb[u][j]);
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int64_t k = k0 + u * 32 * P;
      if (k >= in) break;
      float word[NW][R];  // kWordScale: the word's unscaled sums
#pragma unroll
      for (int j = 0; j < NW; ++j)
#pragma unroll
        for (int r = 0; r < R; ++r) word[j][r] = 0.0f;
#pragma unroll
      for (int part = 0; part < P / 8; ++part) {
        float wf[NW][8];
#pragma unroll
        for (int j = 0; j < NW; ++j)
          expand8<F>(q[u][j], kWordScale ? __float_as_uint(1.0f) : sb[u][j], part, wf[j]);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r >= rn) break;
          float xf[8];
          unpack8(reinterpret_cast<const uint4*>(x + r * ldx + k)[part], xf);
#pragma unroll
          for (int j = 0; j < NW; ++j)
#pragma unroll
            for (int i = 0; i < 8; ++i) {
              float& sum = kWordScale ? word[j][r] : acc[j][r];
              sum = fmaf(wf[j][i], xf[i], sum);
            }
        }
      }
      if constexpr (kWordScale)
#pragma unroll
        for (int j = 0; j < NW; ++j)
#pragma unroll
          for (int r = 0; r < R; ++r)
            acc[j][r] = fmaf(__uint_as_float(sb[u][j]), word[j][r], acc[j][r]);
    }
  }
#pragma unroll
  for (int j = 0; j < NW; ++j)
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (r < rn) acc[j][r] = warp_reduce(acc[j][r], SumOp{});
}

}  // namespace deepinfer::cuda::weight_rows

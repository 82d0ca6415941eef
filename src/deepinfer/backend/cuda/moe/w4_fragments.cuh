// Private to moe/: the pieces both W4A16 expert kernels share (grouped_experts_w4.cu on
// mma.sync, grouped_experts_wgmma.cu on wgmma): MXFP4 nibbles expanded in registers to exact
// bf16 pairs, and the (expert, pass) schedule of prefill's 64-row passes.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "deepinfer/backend/cuda/mma_sync.cuh"
#include "deepinfer/backend/cuda/moe/expert_math.cuh"

namespace deepinfer::cuda::moe_detail {

// cp.async of 4 bytes with a source size: 0 fills the destination with zeros and reads nothing
// (the 16-byte form is mma_sync.cuh's cp_async16).
__device__ inline void copy4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_addr(dst)), "l"(src),
               "r"(valid ? 4 : 0));
}

// A column's E8M0 scale b as the factor that makes a raw pair (below) exact: 2^(b - 1), a bf16
// for b <= 128 (every real checkpoint; b = 0 is 2^-127, as weight_rows::e8m0). Past that, 2^126
// (the raw bits' own offset) and then the scale itself (NaN for 255), a second multiply.
__device__ inline uint32_t bf16x2_bits(uint32_t half) { return half | (half << 16); }
__device__ inline uint32_t first_factor(uint32_t b) {
  return bf16x2_bits(b <= 128 ? (b + 126) << 7 : 253u << 7);
}
__device__ inline uint32_t second_factor(uint32_t b) {
  return bf16x2_bits(b <= 128 ? 0x3f80u : b == 255 ? 0x7fc0u : b << 7);
}

// Nibbles I and I + 4 of w (E2M1) -> a bf16x2 of their raw bits: sign to bit 15 (31), exponent
// and mantissa to bits 6..8 (22..24), so the bits read as value * 2^-126 (0.5 is the subnormal
// 2^-127); then scaled exactly: by `first`, and with kTwice (some column of the warp has an
// E8M0 byte past 128) by `second` too.
template <int I, bool kTwice>
__device__ inline uint32_t expand_pair(uint32_t w, uint32_t first, uint32_t second) {
  const uint32_t v = w << (12 - 4 * I);
  const uint32_t r = mul_bf16x2((v & 0x80008000u) | ((v >> 6) & 0x01C001C0u), first);
  return kTwice ? mul_bf16x2(r, second) : r;
}

// The k map of a 128-k sub-tile: thread t (lane % 4) expands the bytes of k [32t, 32t + 32),
// word p (k 32t + 8p ..) in mma steps 2p, 2p + 1, and step 2p + h's fragment positions {2t, 2t + 1}
// hold nibbles (2h, 2h + 4) of the word, {2t + 8, 2t + 9} nibbles (2h + 1, 2h + 5). So position
// kappa of step s stands for the sub-tile's k below; an activation tile read by hardware in
// fragment order (wgmma's B) is stored permuted by it.
__host__ __device__ inline int w4_k_of(int s, int kappa) {
  return 32 * ((kappa & 7) >> 1) + 8 * (s >> 1) + 2 * (s & 1) + (kappa >> 3) + 4 * (kappa & 1);
}
// Its inverse: the position 16 s + kappa that stands for the sub-tile's k c.
__host__ __device__ inline int w4_pos_of(int c) {
  const int s = 2 * ((c >> 3) & 3) + ((c >> 1) & 1);
  const int kappa = 2 * (c >> 5) + ((c >> 2) & 1) + 8 * (c & 1);
  return 16 * s + kappa;
}

// Which (expert, pass) grid row blockIdx.y takes: the passes of the active experts in order,
// each expert ceil(rows / P) of them, so a hot expert's passes run side by side on several SMs
// instead of one after another in a block (routing is skewed: real traffic has hot experts). Warp
// 0 of the block scans the active experts' pass counts, a lane holding kPer experts so that their
// loads are in flight together. Returns the expert (-1 past the last pass) and the pass's first
// row, through shared memory to the whole block.
constexpr int kPer = 8;
__device__ inline int2 pass_of_row(const GroupedArgs& a, int P) {
  __shared__ int2 found;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x, na = *a.num_active;
    const int target = static_cast<int>(blockIdx.y);
    int base = 0;  // passes of the experts before this round
    int2 hit = make_int2(-1, 0);
    for (int j0 = 0; j0 < na && hit.x < 0; j0 += 32 * kPer) {
      int ex[kPer], np[kPer], mine = 0;
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int j = j0 + lane * kPer + i;
        ex[i] = j < na ? a.active[j] : -1;
      }
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        np[i] = ex[i] < 0 ? 0 : (a.offsets[ex[i] + 1] - a.offsets[ex[i]] + P - 1) / P;
        mine += np[i];
      }
      int incl = mine;  // inclusive scan over the lanes
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += v;
      }
      const int before = base + incl - mine;
      const unsigned in_lane = __ballot_sync(0xffffffffu, target >= before && target < base + incl);
      if (in_lane != 0) {
        const int l = __ffs(in_lane) - 1;
        if (lane == l) {
          int at = before;
#pragma unroll
          for (int i = 0; i < kPer; ++i) {
            if (hit.x < 0 && target < at + np[i]) hit = make_int2(ex[i], (target - at) * P);
            at += np[i];
          }
        }
        hit.x = __shfl_sync(0xffffffffu, hit.x, l);
        hit.y = __shfl_sync(0xffffffffu, hit.y, l);
      }
      base += __shfl_sync(0xffffffffu, incl, 31);
    }
    if (lane == 0) found = hit;
  }
  __syncthreads();
  return found;
}

}  // namespace deepinfer::cuda::moe_detail

// Private to moe/: the expert math both MoeRunner paths share (host grouping + cuBLASLt in
// experts.cu, device grouping + grouped kernels in grouped_experts.cu), so the two round alike.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "deepinfer/backend/cuda/moe/experts.h"

namespace deepinfer::cuda::moe_detail {

// The SwiGLU activation fed to w2, rounded to bf16 as w2's operand: silu(min(g, L)) *
// clamp(u, -L, L) * w (the clamps only when `clamp`; w is 1 unless the routing weight goes
// before w2). The CPU reference's formula (v4 moe.cc).
__device__ inline __nv_bfloat16 swiglu_bf16(float g, float u, bool clamp, float lim, float w) {
  if (clamp) {
    g = fminf(g, lim);
    u = fminf(fmaxf(u, -lim), lim);
  }
  const float silu = g / (1.0f + expf(-g));
  return __float2bfloat16_rn(silu * u * w);
}

inline unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

// out[t] = sum_k slots[t, k] in routing order, then + shared[t] when given (the CPU reference's
// order). Defined in experts.cu.
void combine_slots(const float* slots, const float* shared, int64_t tokens, int k, int64_t d,
                   float* out, cudaStream_t stream);

// What the grouped kernels (grouped_experts.cu, grouped_experts_mma.cu, grouped_experts_w4.cu)
// read: the slots grouped per expert, offsets[e] ..< offsets[e + 1] in `order`; the experts
// that have slots, ascending, in active[0 .. *num_active).
struct GroupedArgs {
  const ExpertWeights* experts;
  const int32_t* offsets;
  const int32_t* active;
  const int32_t* num_active;
  const int32_t* order;
  const float* weights;     // [tokens * top_k], by slot
  const __nv_bfloat16* xb;  // [tokens, hidden]
  // xb permuted by permute_k128: prefill's wide passes then run on wgmma, which also stores h
  // permuted (null: on the mma.sync kernel).
  const __nv_bfloat16* xp = nullptr;
  __nv_bfloat16* h;  // [tokens * top_k, inter], grouped order
  float* slots;      // [tokens * top_k, hidden], by slot
  int64_t hidden, inter;
  int top_k;
  float lim;
  bool before;  // the routing weight scales h (else w2's output)
};

// A grouped kernel's grid has a row per expert that can have slots (grouped_grid_rows), not one
// per expert: a decode step touches a few of 256, and 16k blocks that only find no rows cost
// tens of microseconds per launch. Row y takes the y-th expert with slots; -1 past the last.
inline unsigned grouped_grid_rows(int num_experts, int64_t slots) {
  return static_cast<unsigned>(slots < num_experts ? slots : num_experts);
}
__device__ inline int grouped_expert(const GroupedArgs& a) {
  const int y = static_cast<int>(blockIdx.y);
  return y < *a.num_active ? a.active[y] : -1;
}

// What a grouped kernel's block multiplies for expert e: w1 and w3 (gate-up: in = hidden, out =
// inter) or w2 (down: in = inter, out = hidden).
template <bool kGateUp>
struct ExpertPass {
  static constexpr int kMats = kGateUp ? 2 : 1;
  const DeviceMatrix* mats[kMats];
  int64_t in, out;
  __device__ ExpertPass(const GroupedArgs& a, int e) {
    const ExpertWeights& w = a.experts[e];
    if constexpr (kGateUp) {
      mats[0] = &w.w1;
      mats[1] = &w.w3;
    } else {
      mats[0] = &w.w2;
    }
    in = kGateUp ? a.hidden : a.inter;
    out = kGateUp ? a.inter : a.hidden;
  }
};

// The tensor-core form of the grouped expert kernels (grouped_experts_mma.cu), for batches with
// several rows per expert: hidden and inter multiples of kMmaK. kGateUp: h = swiglu(w1 x, w3 x);
// else slots = w2 h (scaled as GroupedArgs::before says).
inline constexpr int64_t kMmaK = 64;
// `tokens` picks the rows per pass (16, or 64 when experts average more than 16 rows).
void launch_grouped_mma(bool gate_up, MatrixFormat format, const GroupedArgs& a, int num_experts,
                        int64_t tokens, cudaStream_t stream);

// The pipelined W4A16 form for MXFP4 experts (grouped_experts_w4.cu): hidden and inter multiples
// of 256 (decode's 256-wide tiles). Same contract as launch_grouped_mma; ensure_grouped_w4_smem
// raises its kernels' shared memory limits (call it outside any capture).
// narrow_gemv: its narrow case (up to W4_NARROW_MAX_TOKENS) takes launch_grouped_w4_gemv below
// (never in batch-invariant mode, whose batches all keep the mma.sync kernels' chain of sums).
bool grouped_w4_fits(int64_t hidden, int64_t inter);
void ensure_grouped_w4_smem();
void launch_grouped_w4(bool gate_up, const GroupedArgs& a, int num_experts, int64_t tokens,
                       bool narrow_gemv, cudaStream_t stream);
// Its form for decode's few tokens outside batch invariance (grouped_experts_w4_gemv.cu): the
// weights as the mma's A operand, an expert's rows (8 a pass) as its B; hidden and inter
// multiples of 128. Other sums than launch_grouped_w4's kernels (the mma's k order differs).
void ensure_grouped_w4_gemv_smem();
void launch_grouped_w4_gemv(bool gate_up, const GroupedArgs& a, int num_experts, int64_t tokens,
                            cudaStream_t stream);
// Whether launch_grouped_w4 takes its 64-row prefill passes: experts average over 16 rows.
inline bool grouped_w4_wide(int num_experts, int64_t tokens, int top_k) {
  return tokens * top_k > int64_t{16} * num_experts;
}

// The wgmma form of the wide passes (grouped_experts_wgmma.cu), which launch_grouped_w4 takes
// when a.xp is set: x permuted within each 128-k block by permute_k128 (cols a multiple of 128);
// the gate-up stores h permuted the same way, which only the wgmma down reads. Its passes take
// grouped_wgmma_rows rows (64, or 128 when experts average more than 64: long prefill chunks).
void permute_k128(const __nv_bfloat16* x, int64_t rows, int64_t cols, __nv_bfloat16* y,
                  cudaStream_t stream);
void ensure_grouped_wgmma_smem();
int grouped_wgmma_rows(int num_experts, int64_t tokens, int top_k);
void launch_grouped_wgmma(bool gate_up, const GroupedArgs& a, int num_experts, int64_t tokens,
                          cudaStream_t stream);

}  // namespace deepinfer::cuda::moe_detail

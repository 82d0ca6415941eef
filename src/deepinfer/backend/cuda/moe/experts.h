// Routed + shared SwiGLU experts over weights in their stored format (spec §6.8): for each token,
// the sum over its picked experts k (in routing order) of weight_k * w2(silu(min(w1 x, L)) *
// clamp(w3 x, -L, L)), then the shared expert (clamped only when clamp_shared). weight_before_w2
// scales the activation before w2 (official numerics) instead of w2's output (plain).
//
// Weights stay as stored (MXFP4 routed experts, FP8 shared expert; bf16 in float checkpoints).
// Two paths, same math:
// - run(): tokens grouped per expert on the host (one device-to-host copy of the routing), three
//   Linear projections per touched expert (weight_gemv for few rows, else the expert dequantized
//   into Linear's scratch and cuBLASLt); for large prefill chunks, where tensor cores pay off.
// - run_grouped(): grouping and the expert GEMMs on the device (grouped_experts.cu), no host sync
//   or allocation, so decode can be captured in a CUDA graph. Few tokens: warp-per-column dot
//   products that expand the stored weights in registers (W4A16 for MXFP4), memory-bound; more
//   tokens: the same expansion into shared memory, then tensor cores (grouped_experts_mma.cu).
//   MXFP4 experts take the pipelined W4A16 kernels from one token: mma.sync fragments expanded
//   in registers (grouped_experts_w4.cu), prefill's wide passes on wgmma
//   (grouped_experts_wgmma.cu).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/gemm/linear.h"
#include "deepinfer/backend/cuda/quant/device_matrix.h"

namespace deepinfer::cuda {

struct ExpertWeights {
  DeviceMatrix w1;  // [inter, hidden] gate
  DeviceMatrix w3;  // [inter, hidden] up
  DeviceMatrix w2;  // [hidden, inter] down
};

// The default of MoeArgs::grouped_w4_min_tokens (a macro so that a build variant can A/B it).
#ifndef MOE_GROUPED_W4_MIN_TOKENS
#define MOE_GROUPED_W4_MIN_TOKENS 1
#endif
// The default of MoeArgs::grouped_w4_gemv: off until a GPU run times it (docs/gpu_b1_step/).
#ifndef W4_NARROW_GEMV
#define W4_NARROW_GEMV 0
#endif

struct MoeArgs {
  const float* x = nullptr;  // [tokens, hidden]
  // x rounded to bf16 already ([tokens, hidden]), or null: run_grouped rounds x itself.
  const __nv_bfloat16* xb = nullptr;
  int64_t tokens = 0, hidden = 0, inter = 0;
  int top_k = 0;
  const int32_t* expert_ids = nullptr;  // device [tokens, top_k]
  const float* weights = nullptr;       // device [tokens, top_k]
  std::vector<ExpertWeights> experts;   // run() only
  // run_grouped only, which needs no `experts` (if given, its size must be num_experts): a
  // device array of num_experts entries, the same matrices, built once at load; each weight
  // 16-byte aligned, all in expert_format.
  const ExpertWeights* device_experts = nullptr;
  MatrixFormat expert_format = MatrixFormat::kBf16;
  int num_experts = 0;
  const ExpertWeights* shared = nullptr;  // null: no shared expert
  int64_t shared_inter = 0;
  bool clamp_shared = true;
  float swiglu_limit = 10.0f;
  bool weight_before_w2 = false;
  // run_grouped takes the tensor-core kernels (grouped_experts_mma.cu) from this many tokens on,
  // when hidden and inter are multiples of 64; below, the CUDA-core ones. Tests set it to pick.
  int64_t grouped_mma_min_tokens = 8;
  // The same for the W4A16 kernel of MXFP4 experts (grouped_experts_w4.cu): its decode form
  // streams the experts' bytes with cp.async tiles, ahead of the CUDA-core kernel even at B=1.
  int64_t grouped_w4_min_tokens = MOE_GROUPED_W4_MIN_TOKENS;
  // Prefill's wide passes (gate-up and down) on wgmma (grouped_experts_wgmma.cu) rather than
  // mma.sync, outside batch invariance (the two sum in different orders); tests clear it to
  // reach the mma.sync form.
  bool grouped_w4_wgmma = true;
  // Decode's narrow case (up to 4 tokens) in the GEMV form (grouped_experts_w4_gemv.cu: the
  // weights as the mma's A operand) rather than the pipelined kernel's, outside batch invariance
  // (the two sum in different orders); tests set it both ways.
  bool grouped_w4_gemv = W4_NARROW_GEMV != 0;
  float* out = nullptr;  // [tokens, hidden]
};

class MoeRunner {
 public:
  explicit MoeRunner(Linear& linear) : linear_(linear) {}
  ~MoeRunner();
  MoeRunner(const MoeRunner&) = delete;
  MoeRunner& operator=(const MoeRunner&) = delete;
  void run(const MoeArgs& a, cudaStream_t stream);

  // Scratch for run_grouped over up to `tokens` tokens at these dims (it only grows; growing
  // reallocates, so call it before capturing a graph, not between capture and replay).
  void reserve_grouped(int64_t tokens, int top_k, int64_t hidden, int64_t inter,
                       int64_t shared_inter, int num_experts);
  // The tokens reserve_grouped last covered (0 before any call).
  int64_t grouped_tokens() const { return grouped_tokens_; }
  // run()'s result from device-side routing: only kernel launches and cuBLASLt calls (the shared
  // expert's dense GEMMs: capture-safe once their plan for `tokens` rows exists). hidden and
  // inter multiples of DeviceMatrix::per_load(expert_format). Aborts if reserve_grouped did not
  // cover the call. From MOE_SHARED_OVERLAP_MIN_TOKENS to _MAX_TOKENS tokens (grouped_experts.cu;
  // on a stream other than the legacy default one) the shared expert forks onto the runner's own
  // stream and joins before the combine: a captured graph gets them as parallel branches.
  void run_grouped(const MoeArgs& a, cudaStream_t stream);

 private:
  // One expert over `rows` gathered tokens; writes rows of `dst` at dst_rows (scaled as asked).
  void expert(const MoeArgs& a, const ExpertWeights& w, int64_t inter, bool clamp,
              const int32_t* src_rows, const int32_t* dst_rows, const float* row_weights,
              int64_t rows, float* dst, cudaStream_t stream);
  // One expert over all a.tokens rows of xb (a.x in bf16), written straight to dst unscaled:
  // the shared expert, on caller-given scratch.
  void dense_expert(const MoeArgs& a, const ExpertWeights& w, int64_t inter, bool clamp,
                    const __nv_bfloat16* xb, float* g, float* u, __nv_bfloat16* hb, float* dst,
                    cudaStream_t stream);
  template <typename T>
  T* scratch(DeviceBuffer<T>& b, size_t n) {
    if (b.size() < n) b = DeviceBuffer<T>(n);
    return b.get();
  }
  Linear& linear_;
  DeviceBuffer<__nv_bfloat16> xg_, hb_;
  DeviceBuffer<float> g_, u_, y_, slots_, shared_out_, row_w_;
  DeviceBuffer<int32_t> rows_;
  // run_grouped's own scratch, sized only by reserve_grouped so run() never frees it under a
  // captured graph. offsets [E + 1] and order [tokens * top_k]: the slots grouped by expert.
  struct Grouped {
    DeviceBuffer<int32_t> offsets, order;
    DeviceBuffer<__nv_bfloat16> xb, h, shared_h;  // x, routed and shared activations in bf16
    DeviceBuffer<__nv_bfloat16> xp;               // xb permuted for the wgmma gate-up
    DeviceBuffer<float> slots, shared_g, shared_u, shared_out;
  } grouped_;
  int64_t grouped_tokens_ = 0;
  // The shared expert's stream and the fork and join events (made by reserve_grouped).
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
};

}  // namespace deepinfer::cuda

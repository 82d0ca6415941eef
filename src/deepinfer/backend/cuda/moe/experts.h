// Routed + shared SwiGLU experts over bf16 weights (spec §6.8): for each token, the sum over its
// picked experts k (in routing order) of weight_k * w2(silu(min(w1 x, L)) * clamp(w3 x, -L, L)),
// then the shared expert (clamped only when clamp_shared). weight_before_w2 scales the activation
// before w2 (official numerics) instead of w2's output (plain).
//
// MXFP4 experts are dequantized to bf16 at load. Two paths, same math:
// - run(): tokens grouped per expert on the host (one device-to-host copy of the routing), three
//   cuBLASLt GEMMs per touched expert; for large prefill chunks, where tensor cores pay off.
// - run_grouped(): grouping and the expert GEMMs on the device (grouped_experts.cu), no host sync
//   or allocation, so decode can be captured in a CUDA graph; its kernels are memory-bound
//   warp-per-column dot products, meant for few rows per expert.
// A grouped W4A16 / W4A8 kernel reading the packed FP4 weights is next.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/gemm/gemm.h"

namespace deepinfer::cuda {

struct ExpertWeightsBf16 {
  const __nv_bfloat16* w1 = nullptr;  // [inter, hidden] gate
  const __nv_bfloat16* w3 = nullptr;  // [inter, hidden] up
  const __nv_bfloat16* w2 = nullptr;  // [hidden, inter] down
};

struct MoeArgs {
  const float* x = nullptr;  // [tokens, hidden]
  int64_t tokens = 0, hidden = 0, inter = 0;
  int top_k = 0;
  const int32_t* expert_ids = nullptr;     // device [tokens, top_k]
  const float* weights = nullptr;          // device [tokens, top_k]
  std::vector<ExpertWeightsBf16> experts;  // run() only
  // run_grouped only, which needs no `experts` (if given, its size must be num_experts): a
  // device array of num_experts entries, the same pointers, built once at load; each weight
  // 16-byte aligned.
  const ExpertWeightsBf16* device_experts = nullptr;
  int num_experts = 0;
  const ExpertWeightsBf16* shared = nullptr;  // null: no shared expert
  int64_t shared_inter = 0;
  bool clamp_shared = true;
  float swiglu_limit = 10.0f;
  bool weight_before_w2 = false;
  float* out = nullptr;  // [tokens, hidden]
};

class MoeRunner {
 public:
  explicit MoeRunner(Gemm& gemm) : gemm_(gemm) {}
  void run(const MoeArgs& a, cudaStream_t stream);

  // Scratch for run_grouped over up to `tokens` tokens at these dims (it only grows; growing
  // reallocates, so call it before capturing a graph, not between capture and replay).
  void reserve_grouped(int64_t tokens, int top_k, int64_t hidden, int64_t inter,
                       int64_t shared_inter, int num_experts);
  // run()'s result from device-side routing: only kernel launches and cuBLASLt calls (the shared
  // expert's dense GEMMs: capture-safe once their plan for `tokens` rows exists). hidden and
  // inter multiples of 8. Aborts if reserve_grouped did not cover the call.
  void run_grouped(const MoeArgs& a, cudaStream_t stream);

 private:
  // One expert over `rows` gathered tokens; writes rows of `dst` at dst_rows (scaled as asked).
  void expert(const MoeArgs& a, const ExpertWeightsBf16& w, int64_t inter, bool clamp,
              const int32_t* src_rows, const int32_t* dst_rows, const float* row_weights,
              int64_t rows, float* dst, cudaStream_t stream);
  // One expert over all a.tokens rows of xb (a.x in bf16), written straight to dst unscaled:
  // the shared expert, on caller-given scratch.
  void dense_expert(const MoeArgs& a, const ExpertWeightsBf16& w, int64_t inter, bool clamp,
                    const __nv_bfloat16* xb, float* g, float* u, __nv_bfloat16* hb, float* dst,
                    cudaStream_t stream);
  template <typename T>
  T* scratch(DeviceBuffer<T>& b, size_t n) {
    if (b.size() < n) b = DeviceBuffer<T>(n);
    return b.get();
  }
  Gemm& gemm_;
  DeviceBuffer<__nv_bfloat16> xg_, hb_;
  DeviceBuffer<float> g_, u_, y_, slots_, shared_out_, row_w_;
  DeviceBuffer<int32_t> rows_;
  // run_grouped's own scratch, sized only by reserve_grouped so run() never frees it under a
  // captured graph. offsets [E + 1] and order [tokens * top_k]: the slots grouped by expert.
  struct Grouped {
    DeviceBuffer<int32_t> offsets, order;
    DeviceBuffer<__nv_bfloat16> xb, h, shared_h;  // x, routed and shared activations in bf16
    DeviceBuffer<float> slots, shared_g, shared_u, shared_out;
  } grouped_;
};

}  // namespace deepinfer::cuda

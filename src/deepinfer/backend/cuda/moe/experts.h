// Routed + shared SwiGLU experts over bf16 weights (spec §6.8): for each token, the sum over its
// picked experts k (in routing order) of weight_k * w2(silu(min(w1 x, L)) * clamp(w3 x, -L, L)),
// then the shared expert (clamped only when clamp_shared). weight_before_w2 scales the activation
// before w2 (official numerics) instead of w2's output (plain).
//
// First version: MXFP4 experts are dequantized to bf16 at load, tokens are grouped per expert on
// the host (one device-to-host copy of the routing) and each expert runs three cuBLASLt GEMMs.
// That copy makes it impossible to capture in a CUDA graph. The interface (routing on the device,
// weights per expert) is what a grouped W4A16 / W4A8 kernel reading the packed FP4 weights and
// device-side routing will take next.
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
  const int32_t* expert_ids = nullptr;  // device [tokens, top_k]
  const float* weights = nullptr;       // device [tokens, top_k]
  std::vector<ExpertWeightsBf16> experts;
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

 private:
  // One expert over `rows` gathered tokens; writes rows of `dst` at dst_rows (scaled as asked).
  void expert(const MoeArgs& a, const ExpertWeightsBf16& w, int64_t inter, bool clamp,
              const int32_t* src_rows, const int32_t* dst_rows, const float* row_weights,
              int64_t rows, float* dst, cudaStream_t stream);
  template <typename T>
  T* scratch(DeviceBuffer<T>& b, size_t n) {
    if (b.size() < n) b = DeviceBuffer<T>(n);
    return b.get();
  }
  Gemm& gemm_;
  DeviceBuffer<__nv_bfloat16> xg_, hb_;
  DeviceBuffer<float> g_, u_, y_, slots_, shared_out_, row_w_;
  DeviceBuffer<int32_t> rows_;
};

}  // namespace deepinfer::cuda

// Dense projections through cuBLASLt: Y[n, out] = X[n, in] · W[out, in]^T with fp32 accumulation.
// Weights are [out, in] row-major as in the checkpoint. FP8 block-scaled weights are
// dequantized to bf16 at load (see README: correctness first; a block-scaled FP8 GEMM is next).
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

class Gemm {
 public:
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // bf16 operands, fp32 output.
  void bf16(const __nv_bfloat16* w, const __nv_bfloat16* x, float* y, int64_t n, int64_t out,
            int64_t in, cudaStream_t stream);
  // fp32 operands and math (no TF32): for the MoE router, whose top-k must not flip on rounding.
  void f32(const float* w, const float* x, float* y, int64_t n, int64_t out, int64_t in,
           cudaStream_t stream);

 private:
  void run(cudaDataType_t ab, cublasComputeType_t compute, const void* w, const void* x, float* y,
           int64_t n, int64_t out, int64_t in, cudaStream_t stream);
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 32u << 20;
};

// Elementwise fp32 -> bf16 (round to nearest even).
void to_bf16(const float* x, int64_t n, __nv_bfloat16* y, cudaStream_t stream);

}  // namespace deepinfer::cuda

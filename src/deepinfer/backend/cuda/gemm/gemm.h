// Dense projections through cuBLASLt: Y[n, out] = X[n, in] · W[out, in]^T with fp32 accumulation.
// Weights are [out, in] row-major as in the checkpoint. FP8 block-scaled weights are
// dequantized to bf16 at load (see README: correctness first; a block-scaled FP8 GEMM is next).
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

namespace deepinfer::cuda {

// Not thread-safe: one Gemm per stream (its workspace and plan cache are unguarded).
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

  // Batch-invariant mode (DEEPINFER_BATCH_INVARIANT): a row of Y depends on that row of X alone,
  // bit for bit, whatever n is. cuBLASLt picks its algorithm (and split of K) by shape, so here
  // both products, and Linear's over this Gemm, run one-warp-per-column kernels with one fixed
  // order of sums instead (weight_gemv.h). Slower for many rows; decode barely changes.
  void set_batch_invariant(bool on) { batch_invariant_ = on; }
  bool batch_invariant() const { return batch_invariant_; }

 private:
  // What a matmul's descriptors and heuristic depend on; the ld values are derived from the
  // shape today but are part of the key so a strided caller can't alias another plan.
  struct Key {
    cudaDataType_t ab, c;
    cublasComputeType_t compute;
    cublasOperation_t ta, tb;
    int64_t m, n, k, lda, ldb, ldc;
    bool operator<(const Key& o) const {
      return std::tie(ab, c, compute, ta, tb, m, n, k, lda, ldb, ldc) <
             std::tie(o.ab, o.c, o.compute, o.ta, o.tb, o.m, o.n, o.k, o.lda, o.ldb, o.ldc);
    }
  };
  // Built on a shape's first call, then reused: a repeated shape only launches. One plan per
  // distinct row count too (chunk sizes, tokens per expert), so the cache stays small and bounded.
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo;
  };
  const Plan& plan(const Key& key);
  void run(cudaDataType_t ab, cublasComputeType_t compute, const void* w, const void* x, float* y,
           int64_t n, int64_t out, int64_t in, cudaStream_t stream);
  std::map<Key, Plan> plans_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 32u << 20;
  bool batch_invariant_ = false;
};

// Elementwise fp32 -> bf16 (round to nearest even).
void to_bf16(const float* x, int64_t n, __nv_bfloat16* y, cudaStream_t stream);

}  // namespace deepinfer::cuda

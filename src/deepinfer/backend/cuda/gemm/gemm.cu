#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/gemm/gemm.h"

namespace deepinfer::cuda {
namespace {

__global__ void to_bf16_kernel(const float* x, int64_t n, __nv_bfloat16* y) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16_rn(x[i]);
}

}  // namespace

Gemm::Gemm() {
  DI_CUBLAS_CHECK(cublasLtCreate(&handle_));
  DI_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

Gemm::~Gemm() {
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

// Row-major Y[n, out] is column-major Y^T (out x n): Y^T = W^T' · X^T where the column-major
// view of W[out, in] is in x out, so A = W transposed, B = X as is.
void Gemm::run(cudaDataType_t ab, cublasComputeType_t compute, const void* w, const void* x,
               float* y, int64_t n, int64_t out, int64_t in, cudaStream_t stream) {
  if (n == 0 || out == 0) return;
  cublasLtMatmulDesc_t op;
  DI_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  DI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  DI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  cublasLtMatrixLayout_t la, lb, lc;
  DI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, ab, in, out, in));
  DI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, ab, in, n, in));
  DI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, out, n, out));
  cublasLtMatmulPreference_t pref;
  DI_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  DI_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof workspace_bytes_));
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  DI_CUBLAS_CHECK(
      cublasLtMatmulAlgoGetHeuristic(handle_, op, la, lb, lc, lc, pref, 1, &heur, &found));
  if (found == 0) {
    std::fprintf(stderr, "cublasLt: no algorithm for %lld x %lld x %lld\n", (long long)n,
                 (long long)out, (long long)in);
    std::abort();
  }
  const float alpha = 1.0f, beta = 0.0f;
  DI_CUBLAS_CHECK(cublasLtMatmul(handle_, op, &alpha, w, la, x, lb, &beta, y, lc, y, lc, &heur.algo,
                                 workspace_, workspace_bytes_, stream));
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(op);
}

void Gemm::bf16(const __nv_bfloat16* w, const __nv_bfloat16* x, float* y, int64_t n, int64_t out,
                int64_t in, cudaStream_t stream) {
  run(CUDA_R_16BF, CUBLAS_COMPUTE_32F, w, x, y, n, out, in, stream);
}

void Gemm::f32(const float* w, const float* x, float* y, int64_t n, int64_t out, int64_t in,
               cudaStream_t stream) {
  run(CUDA_R_32F, CUBLAS_COMPUTE_32F, w, x, y, n, out, in, stream);
}

void to_bf16(const float* x, int64_t n, __nv_bfloat16* y, cudaStream_t stream) {
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  to_bf16_kernel<<<blocks, 256, 0, stream>>>(x, n, y);
  DI_CUDA_LAUNCH_CHECK();
}

}  // namespace deepinfer::cuda

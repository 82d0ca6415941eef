#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/gemm/gemm.h"
#include "deepinfer/backend/cuda/gemm/weight_gemv.h"
#include "deepinfer/backend/cuda/launch.cuh"

namespace deepinfer::cuda {
namespace {

__global__ void to_bf16_kernel(const float* x, int64_t n, __nv_bfloat16* y) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16_rn(x[i]);
}

// The same rounding, 8 values a thread (two 16-byte loads, one 16-byte store; the last thread
// takes the n % 8 left one at a time), for 16-byte aligned x and y. A value a thread ran at about
// a third of the H100's bandwidth: decode B=128's attention output (16 MB in, 8 MB out) took
// 22 us on an H100.
#ifndef TO_BF16_X8
#define TO_BF16_X8 1  // 0: a value a thread everywhere (a variant to time)
#endif
__global__ void to_bf16_x8_kernel(const float* x, int64_t n, __nv_bfloat16* y) {
  pdl_grid_begin();
  const int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * 8;
  if (i + 8 <= n) {
    const float4 a = *reinterpret_cast<const float4*>(x + i);
    const float4 b = *reinterpret_cast<const float4*>(x + i + 4);
    const __nv_bfloat162 v[4] = {__floats2bfloat162_rn(a.x, a.y), __floats2bfloat162_rn(a.z, a.w),
                                 __floats2bfloat162_rn(b.x, b.y), __floats2bfloat162_rn(b.z, b.w)};
    *reinterpret_cast<uint4*>(y + i) = *reinterpret_cast<const uint4*>(v);
  } else {
    for (int64_t j = i; j < n; ++j) y[j] = __float2bfloat16_rn(x[j]);
  }
}

}  // namespace

Gemm::Gemm() {
  DI_CUBLAS_CHECK(cublasLtCreate(&handle_));
  DI_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

Gemm::~Gemm() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatmulDescDestroy(p.op);
  }
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

// The heuristic is asked once per key with the fixed workspace size, so every cached algorithm
// fits workspace_ (allocated once, never resized).
const Gemm::Plan& Gemm::plan(const Key& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan p;
  DI_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, key.compute, CUDA_R_32F));
  DI_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &key.ta, sizeof key.ta));
  DI_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &key.tb, sizeof key.tb));
  // Column-major layouts: A is k x m (op T), B is k x n, C is m x n.
  DI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, key.ab, key.k, key.m, key.lda));
  DI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, key.ab, key.k, key.n, key.ldb));
  DI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, key.c, key.m, key.n, key.ldc));
  cublasLtMatmulPreference_t pref;
  DI_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  DI_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof workspace_bytes_));
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  DI_CUBLAS_CHECK(
      cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &heur, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0) {
    std::fprintf(stderr, "cublasLt: no algorithm for %lld x %lld x %lld\n", (long long)key.n,
                 (long long)key.m, (long long)key.k);
    std::abort();
  }
  p.algo = heur.algo;
  return plans_.emplace(key, p).first->second;
}

// Row-major Y[n, out] is column-major Y^T (out x n): Y^T = W^T' · X^T where the column-major
// view of W[out, in] is in x out, so A = W transposed, B = X as is.
void Gemm::run(cudaDataType_t ab, cublasComputeType_t compute, const void* w, const void* x,
               float* y, int64_t n, int64_t out, int64_t in, cudaStream_t stream) {
  if (n == 0 || out == 0) return;
  const Key key{ab, CUDA_R_32F, compute, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, in, in, out};
  const Plan& p = plan(key);
  const float alpha = 1.0f, beta = 0.0f;
  DI_CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c,
                                 &p.algo, workspace_, workspace_bytes_, stream));
}

void Gemm::bf16(const __nv_bfloat16* w, const __nv_bfloat16* x, float* y, int64_t n, int64_t out,
                int64_t in, cudaStream_t stream) {
  if (batch_invariant_) {
    DeviceMatrix m;
    m.format = MatrixFormat::kBf16;
    m.data = w;
    m.rows = out;
    m.cols = in;
    weight_gemv(m, x, n, y, stream);
    return;
  }
  run(CUDA_R_16BF, CUBLAS_COMPUTE_32F, w, x, y, n, out, in, stream);
}

void Gemm::f32(const float* w, const float* x, float* y, int64_t n, int64_t out, int64_t in,
               cudaStream_t stream) {
  if (batch_invariant_) {
    f32_gemv(w, x, n, out, in, y, stream);
    return;
  }
  run(CUDA_R_32F, CUBLAS_COMPUTE_32F, w, x, y, n, out, in, stream);
}

void to_bf16(const float* x, int64_t n, __nv_bfloat16* y, cudaStream_t stream) {
  if (n == 0) return;
  if (TO_BF16_X8 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(y) % 16 == 0) {
    const unsigned blocks = static_cast<unsigned>((n + 8 * 256 - 1) / (8 * 256));
    launch_kernel(to_bf16_x8_kernel, blocks, 256, 0, stream, x, n, y);
    return;
  }
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  launch_kernel(to_bf16_kernel, blocks, 256, 0, stream, x, n, y);
}

}  // namespace deepinfer::cuda

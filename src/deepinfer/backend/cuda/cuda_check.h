// CUDA and cuBLAS return codes: a failure here is a bug or a broken device, never bad user input,
// so it aborts with the call, file and line (like DI_CHECK).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define DI_CUDA_CHECK(expr)                                                     \
  do {                                                                          \
    cudaError_t di_err_ = (expr);                                               \
    if (di_err_ != cudaSuccess) {                                               \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, \
                   cudaGetErrorString(di_err_));                                \
      std::abort();                                                             \
    }                                                                           \
  } while (0)

#define DI_CUBLAS_CHECK(expr)                                                                 \
  do {                                                                                        \
    cublasStatus_t di_st_ = (expr);                                                           \
    if (di_st_ != CUBLAS_STATUS_SUCCESS) {                                                    \
      std::fprintf(stderr, "%s:%d: %s failed: cublas status %d\n", __FILE__, __LINE__, #expr, \
                   static_cast<int>(di_st_));                                                 \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

// RMSNorm over rows: y = x * rsqrt(mean(x^2) + eps) (* weight when non-null). y may alias x.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

void rms_norm(const float* x, const float* weight, int64_t rows, int64_t d, float eps, float* y,
              cudaStream_t stream);

}  // namespace deepinfer::cuda

// Split K for the tensor-core projections (fp8_mma, fp8_wgmma): a grid with fewer blocks than
// the device has SMs walks K in `splits` parts, each writing its own fp32 partials, which one more
// launch adds in split order, so the result does not depend on scheduling.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

// The current device's SM count (read once per process).
int device_sms();

// How many parts to split K into: 1 for a grid of at least `want` blocks, else enough for that
// many (within_wave: as many as fit in `want`, for kernels of one block an SM, whose second wave
// would run nearly empty), at least two K tiles a part, and only while the partials
// (splits * n * cols floats) fit partial_floats (partials null: 1).
int k_splits(int64_t blocks, int64_t want, int64_t tiles, int64_t n, int64_t cols,
             const float* partials, int64_t partial_floats, bool within_wave = false);

// y[i] = sum over z of partials[z * count + i], z ascending.
void sum_splits(const float* partials, int splits, int64_t count, float* y, cudaStream_t stream);

}  // namespace deepinfer::cuda

// Greedy sampling: per row of logits the highest value, ties going to the lower token id (as
// the CPU sampler). NaN logits are never picked over a number.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

void argmax_rows(const float* logits, int64_t rows, int64_t vocab, int32_t* out,
                 cudaStream_t stream);

}  // namespace deepinfer::cuda

// The compressors' gated pooling (spec §6.6): for each finished window w and channel c,
// out[w, c] = sum_j softmax_j(gate[w, j, c]) * kv[w, j, c] over the window's `rows` slots.
// CSA passes 2*ratio slots (the previous window's A-halves, then its own B-halves), HCA ratio
// slots. Slots that don't exist (CSA's first window) carry gate -inf and a finite kv.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

void compressor_pool(const float* kv, const float* gate, int64_t windows, int rows, int dim,
                     float* out, cudaStream_t stream);

}  // namespace deepinfer::cuda

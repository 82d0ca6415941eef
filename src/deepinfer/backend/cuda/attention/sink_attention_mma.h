// The tensor-core form of sink_attention (sink_attention_mma.cu), which sink_attention() picks;
// internal to backend/cuda/attention.
#pragma once

#include <cuda_runtime.h>

#include "deepinfer/backend/cuda/attention/sink_attention.h"

namespace deepinfer::cuda {

// Its shape: 64 heads of 512 dims (V4's and V4.1's attention).
bool sink_attention_mma_fits(const SinkAttentionArgs& a);
void sink_attention_mma(const SinkAttentionArgs& a, cudaStream_t stream);

}  // namespace deepinfer::cuda

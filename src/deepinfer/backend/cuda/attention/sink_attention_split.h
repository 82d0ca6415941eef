// sink_attention for launches of few queries (decode at small batches), split over the keys
// (flash-decoding): the fp32 kernel gives such a launch a block per (query, head group), each
// walking all of the query's keys (at B=1 64 blocks each reading 640 keys twice). Here block
// (query, chunk of kSinkSplitChunk keys, group of 8 heads) scores its keys and sums its chunk's
// softmax numerators and values; a second kernel merges the chunks in order with the sink.
// Same fp32 math as sink_attention.cu's kernel in another order of the softmax's sums; a query's
// bits depend on its own keys only (chunks and groups are fixed), never on the launch.
#pragma once

#include <cuda_runtime.h>

#include "deepinfer/backend/cuda/attention/sink_attention.h"

namespace deepinfer::cuda {

inline constexpr int kSinkSplitChunk = 32;

// Whether SinkAttentionArgs::split_partials holds this launch's partial sums.
bool sink_split_fits(const SinkAttentionArgs& a);
void sink_attention_split(const SinkAttentionArgs& a, cudaStream_t stream);

}  // namespace deepinfer::cuda

// Sliding-window + compressed sparse attention with a per-head sink (spec §6.5), for every head
// sharing one K=V row per key (V4: 64 heads, one 512-dim head), in decode and prefill alike.
//
// Query t sits at position pos0 + t and sees, in one softmax with the sink logit:
//   - the window: positions max(0, s - window + 1) .. s, read from `ring`, where position p is
//     row p % ring_rows (the caller keeps ring_rows >= window - 1 + num_queries);
//   - compressed entries: rows selected[t * max_selected + j] of `entries`, j < num_selected[t].
// out[t, h] = sum_k softmax_k * key_k. Output de-rotation is the caller's (rope, inverse).
// Batched decode sets query_seq: query t then belongs to sequence query_seq[t] (-1: a padding
// row, whose output is zero), at position positions[t], with that sequence's ring and entries
// from the per-sequence tables; pos0, ring and entries are unused.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

struct SinkAttentionArgs {
  const float* q = nullptr;     // [num_queries, num_heads, head_dim]
  const float* ring = nullptr;  // [ring_rows, head_dim]
  int64_t ring_rows = 0;
  const float* entries = nullptr;         // [*, head_dim]; may be null when max_selected is 0
  const int32_t* selected = nullptr;      // [num_queries, max_selected]
  const int32_t* num_selected = nullptr;  // [num_queries]
  int max_selected = 0;
  const float* sinks = nullptr;  // [num_heads]
  float* out = nullptr;          // [num_queries, num_heads, head_dim]
  int64_t num_queries = 0, pos0 = 0;
  int num_heads = 0, head_dim = 0, window = 0;
  float scale = 0;
  const int32_t* query_seq = nullptr;         // device [num_queries]; null: one sequence
  const int64_t* positions = nullptr;         // device [num_queries]
  const float* const* rings = nullptr;        // device [sequences]
  const float* const* seq_entries = nullptr;  // device [sequences]; may be null (no entries)
};

void sink_attention(const SinkAttentionArgs& a, cudaStream_t stream);

}  // namespace deepinfer::cuda

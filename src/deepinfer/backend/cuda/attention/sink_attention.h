// Sliding-window + compressed sparse attention with a per-head sink (spec §6.5), for every head
// sharing one K=V row per key (V4: 64 heads, one 512-dim head), in decode and prefill alike.
//
// Query t sits at position pos0 + t and sees, in one softmax with the sink logit:
//   - the window: positions max(0, s - window + 1) .. s. With `fresh` set, positions from the
//     query's segment start on (pos0; in batched decode the row's own position) are the
//     segment's new keys, fresh[t - (s - p)], and earlier ones come from `ring`, where position
//     p is row p % ring_rows (ring_rows >= window - 1). Without it every position is read from
//     the ring, which then holds the segment too (ring_rows >= window - 1 + num_queries);
//   - compressed entries: entry selected[t * max_selected + j] of `entries`, j < num_selected[t].
// out[t, h] = sum_k softmax_k * key_k. Output de-rotation is the caller's (rope, inverse).
// Batched decode sets query_seq: query t then belongs to sequence query_seq[t] (-1: a padding
// row, whose output is zero), at position positions[t], with that sequence's ring from `rings`
// and its entries in row query_seq[t] of the entry tables; pos0 and ring are unused. One
// sequence: its entries are row 0.
//
// Three kernels: fp32 on CUDA cores (sink_attention.cu), the same split over chunks of keys for
// launches of few queries (sink_attention_split.cu, fp32, the softmax summed chunk by chunk) and,
// for V4's 64 heads of 512 dims, bf16 mma.sync with fp32 accumulation (sink_attention_mma.cu:
// Q, K and the probabilities rounded to bf16). kAuto takes tensor cores for launches of at least
// kSinkMmaMinQueries queries, the split kernel for at most kSinkSplitMaxQueries where the caller
// gave room for its partial sums (SinkAttentionArgs::split_partials), else fp32. Each kernel gives
// a query the same bits whatever else its launch holds.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "deepinfer/backend/cuda/entry_pages.h"

namespace deepinfer::cuda {

enum class SinkKernel { kAuto, kFp32, kTensorCores, kSplit };
// Below this many queries a launch has too few blocks (one per query) for the tensor-core
// kernel; the fp32 kernel then splits the heads over blocks. 16 against 64 took B=32's step
// 7.87 -> 7.32 ms on an H100, B=1 and 128 unchanged (docs/gpu_b1_step/run6_h100); B=32's CSA
// sink phase had taken about 236 us a layer on the fp32 kernel (docs/gpu_w4_rows_sink_loads/).
// SINK_MMA_MIN_QUERIES lets a variant time other bounds.
#ifndef SINK_MMA_MIN_QUERIES
#define SINK_MMA_MIN_QUERIES 16
#endif
inline constexpr int64_t kSinkMmaMinQueries = SINK_MMA_MIN_QUERIES;
// kAuto splits launches of at most this many queries, where the fp32 kernel gives a block one or
// two heads and so rereads each key for many blocks. Measured on an H100 at 4k context: B=1's
// step 203 us split against 350; B=32's CSA and HCA launches 1.31 ms split against 0.91.
inline constexpr int64_t kSinkSplitMaxQueries = 8;

struct SinkAttentionArgs {
  const float* q = nullptr;     // [num_queries, num_heads, head_dim]
  const float* ring = nullptr;  // [ring_rows, head_dim]
  int64_t ring_rows = 0;
  const float* fresh = nullptr;           // [num_queries, head_dim]; see above
  EntryPages entries;                     // pool may be null when max_selected is 0
  const int32_t* selected = nullptr;      // [num_queries, max_selected]
  const int32_t* num_selected = nullptr;  // [num_queries]
  int max_selected = 0;
  const float* sinks = nullptr;  // [num_heads]
  float* out = nullptr;          // [num_queries, num_heads, head_dim]
  int64_t num_queries = 0, pos0 = 0;
  int num_heads = 0, head_dim = 0, window = 0;
  float scale = 0;
  const int32_t* query_seq = nullptr;     // device [num_queries]; null: one sequence
  const int64_t* positions = nullptr;     // device [num_queries]
  const float* const* rings = nullptr;    // device [sequences]
  SinkKernel kernel = SinkKernel::kAuto;  // kTensorCores needs 64 heads of 512 dims
  // The split kernel's partial sums (device, sink_split_floats of the launch); kAuto takes it
  // only where they fit, kSplit needs them.
  float* split_partials = nullptr;
  int64_t split_partials_floats = 0;
};

void sink_attention(const SinkAttentionArgs& a, cudaStream_t stream);

// The floats of split partials a launch of `queries` queries of at most max_keys keys (window +
// selected) needs.
int64_t sink_split_floats(int64_t queries, int num_heads, int head_dim, int max_keys);

}  // namespace deepinfer::cuda

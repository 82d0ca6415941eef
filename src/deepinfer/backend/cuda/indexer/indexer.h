// Lightning indexer (spec §6.7). Query t at position pos0 + t sees entries e < (pos + 1) / ratio;
// its score for e is sum_h w[t, h] * weight_scale * relu(q[t, h] . k[e]) * score_scale.
// indexer_topk keeps the top_k highest (ties: the earlier entry, as the CPU reference) and
// writes them in ascending entry order, padding with -1; num_selected[t] = min(top_k, visible).
// Batched decode sets query_seq and positions: query t belongs to sequence query_seq[t] (-1: a
// padding row that sees nothing), sits at positions[t] and scores that sequence's keys (row
// query_seq[t] of the key tables; one sequence: row 0); num_entries is then the capacity bound
// (the scores' row stride), not a visible count.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "deepinfer/backend/cuda/entry_pages.h"

namespace deepinfer::cuda {

// How many entries query t sees: (pos0 + t + 1) / ratio for one sequence; in batched decode
// (query_seq set) (positions[t] + 1) / ratio, or none for a padding row (query_seq[t] < 0).
__host__ __device__ inline int64_t indexer_visible(int64_t t, int64_t pos0,
                                                   const int64_t* positions,
                                                   const int32_t* query_seq, int ratio) {
  if (!query_seq) return (pos0 + t + 1) / ratio;
  return query_seq[t] < 0 ? 0 : (positions[t] + 1) / ratio;
}

struct IndexerArgs {
  const float* q = nullptr;  // [num_queries, num_heads, head_dim], rotated
  const float* w = nullptr;  // [num_queries, num_heads] (weights_proj output)
  EntryPages keys;           // num_entries keys of head_dim
  int64_t num_queries = 0, pos0 = 0, num_entries = 0;
  int num_heads = 0, head_dim = 0, ratio = 4;
  float weight_scale = 0, score_scale = 0;
  const int32_t* query_seq = nullptr;  // device [num_queries]; null: one sequence
  const int64_t* positions = nullptr;  // device [num_queries]

  // On the device: query t's row of the key tables and how many entries it sees (0 for padding).
  __host__ __device__ void query_view(int64_t t, int64_t& seq, int64_t& visible) const {
    seq = query_seq ? query_seq[t] : 0;
    visible = indexer_visible(t, pos0, positions, query_seq, ratio);
  }
};

// scores: [num_queries, num_entries]; entries a query can't see are left unwritten. On tensor
// cores (3xTF32, scores_mma.h) up to 64 heads of 128 dims, else in fp32 on CUDA cores; either way
// a query's scores are the same bits whatever else the launch holds.
void indexer_scores(const IndexerArgs& a, float* scores, cudaStream_t stream);

// The most entries one block sorts in shared memory. Past it, top-k runs in two passes (each
// chunk of kMaxIndexerEntries keeps its best top_k, then one block merges the survivors), up to
// indexer_topk_capacity(top_k) visible entries (262,144 for V4's and V4.1's 512 and 1024...: see
// there); the two-pass path needs indexer_topk_reserve first (outside any graph capture).
inline constexpr int64_t kMaxIndexerEntries = 16384;
int64_t indexer_topk_capacity(int top_k);
// Scratch for num_queries queries over up to num_entries visible entries (grows, never shrinks;
// nothing to do up to kMaxIndexerEntries).
void indexer_topk_reserve(int64_t num_queries, int64_t num_entries, int top_k);

void indexer_topk(const float* scores, int64_t num_queries, int64_t num_entries, int64_t pos0,
                  int ratio, int top_k, int32_t* selected, int32_t* num_selected,
                  cudaStream_t stream);
// Batched decode: query t at positions[t], none visible where query_seq[t] < 0; num_entries is
// the bound every row's visible count stays within.
void indexer_topk_rows(const float* scores, int64_t num_queries, int64_t num_entries,
                       const int64_t* positions, const int32_t* query_seq, int ratio, int top_k,
                       int32_t* selected, int32_t* num_selected, cudaStream_t stream);

}  // namespace deepinfer::cuda

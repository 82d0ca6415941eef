// V4.1's two-level top-k (spec §11.2.4) around the indexer's scores of one sequence's queries
// (indexer.h's layout: query t at pos0 + t sees entries e < (pos0 + t + 1) / ratio, scores
// [num_queries, num_entries]).
//   candidate_blocks: level one at the candidate source. Blocks of block_size entries score as
//     their best visible entry; the block of the newest visible entry always stays (it is only
//     partly filled) and counts among the top_blocks kept (ties: the lower block). keep
//     [num_queries, max_blocks] gets 1 for a kept block with a visible entry.
//   mask_outside_candidates: later index sources of the group score -inf outside the kept blocks.
//   drop_masked_picks: after indexer_topk, removes picked entries whose score is -inf (fewer
//     unmasked entries than top_k), keeping ascending order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

struct CandidateArgs {
  int64_t num_queries = 0, num_entries = 0, pos0 = 0;
  int ratio = 1, block_size = 1, top_blocks = 1;
  int max_blocks = 0;  // keep's row stride: at least ceil(num_entries / block_size)
};

void candidate_blocks(const CandidateArgs& a, const float* scores, uint8_t* keep,
                      cudaStream_t stream);
void mask_outside_candidates(const CandidateArgs& a, const uint8_t* keep, float* scores,
                             cudaStream_t stream);
void drop_masked_picks(const float* scores, int64_t num_queries, int64_t num_entries,
                       int max_selected, int32_t* selected, int32_t* num_selected,
                       cudaStream_t stream);

}  // namespace deepinfer::cuda

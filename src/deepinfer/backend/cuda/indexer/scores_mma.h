// The indexer's scores on tensor cores (indexer.h's contract; indexer_scores takes this path
// whenever the dims fit). Per query the scores are a [heads x head_dim] by [head_dim x entries]
// product, relu, then a weighted sum over heads: the product runs as 3xTF32 mma.sync
// (mma_sync.cuh), about fp32's precision, and each query's sums never depend on the other
// queries of the launch, so a row is the same alone and in a batch.
#pragma once

#include <cuda_runtime.h>

#include "deepinfer/backend/cuda/indexer/indexer.h"

namespace deepinfer::cuda {

// Up to 64 heads of up to 128 dims (V4's and V4.1's 64 x 128 among them).
bool indexer_scores_mma_fits(const IndexerArgs& a);
void indexer_scores_mma(const IndexerArgs& a, float* scores, cudaStream_t stream);

}  // namespace deepinfer::cuda

// The DSpark head's per-draft steps on the device (cuda_dspark.h), so the drafts chain without a
// host round trip: chain[i] is the previous token of draft i (chain[0] the anchor), and draft i
// is argmax_rows of its biased logits, written to chain[i + 1].
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda::v41f {

// DSpark's tap of n rows of streams X [n, hc, hidden]: out[t * stride + i] = (sum over j of
// X[t, j, i]) / hc, summed in stream order as the CPU's record_tap.
void hc_mean_rows(const float* X, int64_t n, int hc, int64_t hidden, float* out, int64_t stride,
                  cudaStream_t stream);
// logits[v] += markov_head[v] . markov_embed[*prev] (rows of `rank` floats), v < vocab.
void markov_bias(const float* markov_embed, const float* markov_head, const int32_t* prev,
                 float* logits, int64_t vocab, int rank, cudaStream_t stream);
// *out = sigmoid(proj . [x, markov_embed[*prev]]) (x: hidden floats, the un-normed row).
void draft_confidence(const float* proj, const float* x, const float* markov_embed,
                      const int32_t* prev, int64_t hidden, int rank, float* out,
                      cudaStream_t stream);

}  // namespace deepinfer::cuda::v41f

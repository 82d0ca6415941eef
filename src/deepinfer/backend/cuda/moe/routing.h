// MoE routing (spec §6.8): affinities a = sqrt(softplus(logit)); experts picked by hash
// (tid2eid[token]) or by the top experts_per_token of a + bias (ties: the lower expert id, as
// the CPU reference), in that order; weights a[e] * route_scale / (sum of picked a + 1e-20).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

struct RoutingArgs {
  const float* logits = nullptr;       // [tokens, num_experts], fp32 router output
  const float* bias = nullptr;         // [num_experts]; used when tid2eid is null
  const int32_t* tid2eid = nullptr;    // [vocab, top_k] for hash layers
  const int32_t* token_ids = nullptr;  // [tokens], hash layers only
  int64_t tokens = 0;
  int num_experts = 0, top_k = 0;
  float route_scale = 1.0f;
  // V4.1 (spec §11.2.6): affinities of logit / temperature; normalize false (V4.1 with
  // norm_topk_prob off or one expert) makes the weights a[e] * route_scale.
  float temperature = 1.0f;
  bool normalize = true;
};

void route(const RoutingArgs& a, int32_t* expert_ids, float* weights, cudaStream_t stream);

}  // namespace deepinfer::cuda

// The MoE sub-layer with its routed experts spread over a group of ranks (issue 22): attention is
// data-parallel (each rank runs its own sequences), the routed experts of the main layers are
// sharded (expert e lives on rank e % size, or where an EPLB placement puts its replicas), the
// shared expert and the router are replicated.
// Each rank routes its tokens, sends every (token, expert) pair to the expert's rank (dispatch),
// computes the pairs it received, and gets the weighted outputs back (combine), which it adds in
// top-k order as moe_forward does: the result is bitwise moe_forward's on one rank.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/model_context.h"

namespace deepinfer::v4 {

// Collective: every rank of m.expert_group calls it once per MoE layer of every forward, with
// n >= 0 of its own tokens. Errors are the group's (a rank gone, a timeout).
Status moe_forward_ep(const ModelContext& m, const std::string& prefix, bool hash, const float* h,
                      const int32_t* ids, int64_t n, float* out);

// The shared expert on n rows of h [n, hidden] (on the pool, while the exchange is on the wire):
// `expert(row, acc)` adds one row's output into acc. Each output row holds exactly what the
// expert adds, for sum_in_slot_order to add it where moe_forward does (both families).
std::vector<float> shared_expert_rows(int64_t n, int64_t hidden, const float* h,
                                      const std::function<void(const float*, float*)>& expert);

// out[t] = 0 + contrib[t, 0] + ... + contrib[t, K-1] + shared[t] (shared may be null), in that
// order: a one-rank MoE's sum, bit for bit.
void sum_in_slot_order(const float* contrib, const float* shared, int64_t n, int K, int64_t hidden,
                       float* out);

// Whether a checkpoint tensor belongs on `rank` of a group of `size`: everything but the main
// layers' routed experts of other ranks (e % size, or per `placement` when given).
bool keeps_tensor(const std::string& name, int rank, int size,
                  const ExpertPlacement* placement = nullptr);

// The rank that computes `expert` of main layer `layer` for row `row` of this rank's batch.
int expert_rank(const Collective& group, const ExpertPlacement* placement, int layer, int expert,
                int64_t row);

// A placement given to a model: it needs a group, and must fit the model and the group (errors
// name the plan's field, for both families).
Status check_expert_placement(const ExpertPlacement* placement, const Collective* group,
                              int num_layers, int num_experts);

}  // namespace deepinfer::v4

// The MoE sub-layer with its routed experts spread over a group of ranks (issue 22): attention is
// data-parallel (each rank runs its own sequences), the routed experts of the main layers are
// sharded (expert e lives on rank e % size, or where an EPLB placement puts its replicas), the
// shared expert and the router are replicated.
// Each rank routes its tokens, sends every (token, expert) pair to the expert's rank (dispatch),
// computes the pairs it received, and gets the weighted outputs back (combine), which it adds in
// top-k order as moe_forward does: the result is bitwise moe_forward's on one rank.
#pragma once

#include <cstdint>
#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/model_context.h"

namespace deepinfer::v4 {

// Collective: every rank of m.expert_group calls it once per MoE layer of every forward, with
// n >= 0 of its own tokens. Errors are the group's (a rank gone, a timeout).
Status moe_forward_ep(const ModelContext& m, const std::string& prefix, bool hash, const float* h,
                      const int32_t* ids, int64_t n, float* out);

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

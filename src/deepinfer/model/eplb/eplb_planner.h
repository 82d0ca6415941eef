// EPLB's placement planner (issue 22; docs/decisions/0013): from measured routing counts, which
// experts get redundant copies and which rank holds each copy, per main layer, so that the
// busiest rank's expected load is as small as a greedy finds. Pure and deterministic: the same
// counts and sizes give the same plan.
#pragma once

#include "deepinfer/base/status.h"
#include "deepinfer/model/eplb/expert_placement.h"
#include "deepinfer/model/eplb/placement_json.h"

namespace deepinfer {

// counts[layer][expert]: routed picks. Every layer gets num_experts + redundant slots, spread
// evenly over num_ranks (so (num_experts + redundant) % num_ranks must be 0, and no rank may
// need more slots than there are experts). Per layer:
//  1. replicate: `redundant` times, give one more copy to the expert with the highest load per
//     copy (count / copies; ties to the lower id) that has fewer copies than ranks;
//  2. pack: copies heaviest first (ties: lower expert id) onto the least loaded rank (ties: the
//     lower rank) that has a free slot and no copy of that expert yet; when every rank with a
//     free slot already has one, a copy elsewhere moves into a free slot to make room.
// A copy's load is count / copies: dispatch spreads an expert's tokens evenly over its copies.
// Errors name the parameter (--ranks, --redundant) or the counts' shape.
StatusOr<ExpertPlacement> plan_placement(const RoutingCounts& counts, int num_ranks, int redundant);

// The load each rank of `p` is expected to carry in `layer` under `counts` (count / copies per
// slot); tests and the command's summary compare it with the e % size placement's.
std::vector<double> rank_loads(const ExpertPlacement& p, const RoutingCounts& counts, int layer);

}  // namespace deepinfer

// Which rank holds which routed experts, per main layer (EPLB, issue 22; docs/decisions/0013).
// Every rank has the same number of slots; a slot holds one logical expert, an expert may sit in
// slots of several ranks (replicas of a hot expert) but never twice on one rank. Without a
// placement, expert parallelism keeps expert e on rank e % size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer {

class ExpertPlacement {
 public:
  // ranks[layer][rank] lists the experts in that rank's slots. Errors name the field (as the
  // plan file spells it): sizes, an expert out of range or twice on one rank, an expert with no
  // replica in a layer.
  static StatusOr<ExpertPlacement> create(int num_experts,
                                          std::vector<std::vector<std::vector<int32_t>>> ranks);

  int num_layers() const { return static_cast<int>(ranks_.size()); }
  int num_experts() const { return num_experts_; }
  int num_ranks() const { return ranks_.empty() ? 0 : static_cast<int>(ranks_[0].size()); }
  int slots_per_rank() const;
  const std::vector<int32_t>& experts_on(int layer, int rank) const { return ranks_[layer][rank]; }
  // The ranks holding `expert` in `layer`, ascending (at least one).
  const std::vector<int32_t>& replicas(int layer, int expert) const {
    return replicas_[layer][expert];
  }
  bool holds(int rank, int layer, int expert) const;
  // The rank that computes `expert` of `layer` for row `row` of rank `from`'s batch: replica
  // (row + from) % count, so one token per rank (decode) still spreads over the replicas.
  int rank_for(int layer, int expert, int from, int64_t row) const {
    const std::vector<int32_t>& r = replicas_[layer][expert];
    return r[static_cast<size_t>((row + from) % static_cast<int64_t>(r.size()))];
  }

 private:
  int num_experts_ = 0;
  std::vector<std::vector<std::vector<int32_t>>> ranks_;     // [layer][rank] -> experts
  std::vector<std::vector<std::vector<int32_t>>> replicas_;  // [layer][expert] -> ranks
};

// Whether a placement fits a model (its main layers and routed experts) and a group; errors name
// the field (num_layers, num_experts, num_ranks) and both values.
Status check_placement_fits(const ExpertPlacement& p, int num_layers, int num_experts,
                            int group_size);

}  // namespace deepinfer

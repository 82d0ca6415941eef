#include "deepinfer/model/eplb/expert_placement.h"

namespace deepinfer {

StatusOr<ExpertPlacement> ExpertPlacement::create(
    int num_experts, std::vector<std::vector<std::vector<int32_t>>> ranks) {
  if (num_experts < 1) return invalid_argument("num_experts must be >= 1");
  if (ranks.empty()) return invalid_argument("layers: no layer");
  const size_t num_ranks = ranks[0].size();
  if (num_ranks < 1) return invalid_argument("layers[0]: no rank");
  const size_t slots = ranks[0][0].size();
  ExpertPlacement p;
  p.num_experts_ = num_experts;
  p.replicas_.assign(ranks.size(), std::vector<std::vector<int32_t>>(num_experts));
  for (size_t l = 0; l < ranks.size(); ++l) {
    const std::string at = "layers[" + std::to_string(l) + "]";
    if (ranks[l].size() != num_ranks)
      return invalid_argument(at + ": " + std::to_string(ranks[l].size()) +
                              " ranks, layers[0] has " + std::to_string(num_ranks));
    for (size_t r = 0; r < num_ranks; ++r) {
      const std::string at_r = at + "[" + std::to_string(r) + "]";
      if (ranks[l][r].size() != slots)
        return invalid_argument(at_r + ": " + std::to_string(ranks[l][r].size()) +
                                " slots, every rank must have " + std::to_string(slots));
      for (int32_t e : ranks[l][r]) {
        if (e < 0 || e >= num_experts)
          return invalid_argument(at_r + ": expert " + std::to_string(e) + " is outside [0, " +
                                  std::to_string(num_experts) + ")");
        std::vector<int32_t>& reps = p.replicas_[l][e];
        if (!reps.empty() && reps.back() == static_cast<int32_t>(r))
          return invalid_argument(at_r + ": expert " + std::to_string(e) + " is twice on one rank");
        reps.push_back(static_cast<int32_t>(r));
      }
    }
    for (int e = 0; e < num_experts; ++e)
      if (p.replicas_[l][e].empty())
        return invalid_argument(at + ": expert " + std::to_string(e) + " has no replica");
  }
  p.ranks_ = std::move(ranks);
  return p;
}

int ExpertPlacement::slots_per_rank() const {
  return ranks_.empty() ? 0 : static_cast<int>(ranks_[0][0].size());
}

bool ExpertPlacement::holds(int rank, int layer, int expert) const {
  if (layer < 0 || layer >= num_layers() || expert < 0 || expert >= num_experts_) return false;
  for (int32_t r : replicas_[layer][expert])
    if (r == rank) return true;
  return false;
}

Status check_placement_fits(const ExpertPlacement& p, int num_layers, int num_experts,
                            int group_size) {
  auto differs = [](const char* field, int plan, const std::string& what, int want) {
    return invalid_argument(std::string(field) + " is " + std::to_string(plan) + ", but " + what +
                            " " + std::to_string(want));
  };
  if (p.num_layers() != num_layers)
    return differs("num_layers", p.num_layers(), "the model's main layers are", num_layers);
  if (p.num_experts() != num_experts)
    return differs("num_experts", p.num_experts(), "the model's routed experts are", num_experts);
  if (p.num_ranks() != group_size)
    return differs("num_ranks", p.num_ranks(), "--expert-parallel-size is", group_size);
  return ok_status();
}

}  // namespace deepinfer

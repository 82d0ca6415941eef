// EPLB's two files (docs/decisions/0013): the plan (a placement) and the routing counts it is
// planned from. Parse errors name the origin (a path) and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/eplb/expert_placement.h"

namespace deepinfer {

// The plan file (JSON): {"num_layers", "num_experts", "num_ranks", "slots_per_rank",
// "layers": [[[expert, ...] per rank] per layer]}. Parse errors name `origin` and the field.
StatusOr<ExpertPlacement> parse_placement_json(const std::string& text, const std::string& origin);
StatusOr<ExpertPlacement> read_placement_file(const std::string& path);
std::string placement_to_json(const ExpertPlacement& p);

// Routing counts (JSON): {"num_layers", "num_experts", "counts": [[picks per expert] per layer]},
// what `GET /expert_counts` serves and `deepinfer eplb plan --counts` reads.
using RoutingCounts = std::vector<std::vector<uint64_t>>;  // [layer][expert]
StatusOr<RoutingCounts> parse_counts_json(const std::string& text, const std::string& origin);
std::string counts_to_json(const RoutingCounts& counts);

}  // namespace deepinfer

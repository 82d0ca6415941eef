#include "deepinfer/model/eplb/placement_json.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace deepinfer {
namespace {

using nlohmann::json;

Status bad(const std::string& origin, const std::string& field, const std::string& why) {
  return invalid_argument(origin + ": " + field + ": " + why);
}

StatusOr<json> parse_object(const std::string& text, const std::string& origin) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument(origin + ": not valid JSON");
  if (!j.is_object()) return invalid_argument(origin + ": expected a JSON object");
  return j;
}

StatusOr<int> positive_int(const json& j, const std::string& origin, const char* field) {
  if (!j.contains(field)) return bad(origin, field, "missing");
  const json& v = j[field];
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (1 << 20))
    return bad(origin, field, "expected a positive integer, got " + v.dump());
  return v.get<int>();
}

// j[field] as an array of n elements.
Status array_of(const json& v, size_t n, const std::string& origin, const std::string& field) {
  if (!v.is_array()) return bad(origin, field, "expected an array, got " + v.dump().substr(0, 40));
  if (v.size() != n)
    return bad(origin, field, std::to_string(v.size()) + " entries, expected " + std::to_string(n));
  return ok_status();
}

}  // namespace

StatusOr<ExpertPlacement> parse_placement_json(const std::string& text, const std::string& origin) {
  ASSIGN_OR_RETURN(json j, parse_object(text, origin));
  ASSIGN_OR_RETURN(const int layers, positive_int(j, origin, "num_layers"));
  ASSIGN_OR_RETURN(const int experts, positive_int(j, origin, "num_experts"));
  ASSIGN_OR_RETURN(const int ranks, positive_int(j, origin, "num_ranks"));
  ASSIGN_OR_RETURN(const int slots, positive_int(j, origin, "slots_per_rank"));
  if (!j.contains("layers")) return bad(origin, "layers", "missing");
  RETURN_IF_ERROR(array_of(j["layers"], layers, origin, "layers"));
  std::vector<std::vector<std::vector<int32_t>>> placed(layers);
  for (int l = 0; l < layers; ++l) {
    const std::string at = "layers[" + std::to_string(l) + "]";
    const json& lj = j["layers"][l];
    RETURN_IF_ERROR(array_of(lj, ranks, origin, at));
    placed[l].resize(ranks);
    for (int r = 0; r < ranks; ++r) {
      const std::string at_r = at + "[" + std::to_string(r) + "]";
      RETURN_IF_ERROR(array_of(lj[r], slots, origin, at_r));
      for (const json& e : lj[r]) {
        if (!e.is_number_integer())
          return bad(origin, at_r, "expected expert ids, got " + e.dump());
        const int64_t id = e.get<int64_t>();
        if (id < 0 || id >= experts)
          return bad(origin, at_r,
                     "expert " + std::to_string(id) +
                         " is outside [0, num_experts = " + std::to_string(experts) + ")");
        placed[l][r].push_back(static_cast<int32_t>(id));
      }
    }
  }
  StatusOr<ExpertPlacement> p = ExpertPlacement::create(experts, std::move(placed));
  if (!p.ok()) return invalid_argument(origin + ": " + p.status().message());
  return p;
}

StatusOr<ExpertPlacement> read_placement_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return not_found(path + ": cannot open the EPLB plan");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_placement_json(ss.str(), path);
}

std::string placement_to_json(const ExpertPlacement& p) {
  json layers = json::array();
  for (int l = 0; l < p.num_layers(); ++l) {
    json ranks = json::array();
    for (int r = 0; r < p.num_ranks(); ++r) ranks.push_back(p.experts_on(l, r));
    layers.push_back(std::move(ranks));
  }
  json j = {{"num_layers", p.num_layers()},
            {"num_experts", p.num_experts()},
            {"num_ranks", p.num_ranks()},
            {"slots_per_rank", p.slots_per_rank()},
            {"layers", std::move(layers)}};
  return j.dump() + "\n";
}

StatusOr<RoutingCounts> parse_counts_json(const std::string& text, const std::string& origin) {
  ASSIGN_OR_RETURN(json j, parse_object(text, origin));
  ASSIGN_OR_RETURN(const int layers, positive_int(j, origin, "num_layers"));
  ASSIGN_OR_RETURN(const int experts, positive_int(j, origin, "num_experts"));
  if (!j.contains("counts")) return bad(origin, "counts", "missing");
  RETURN_IF_ERROR(array_of(j["counts"], layers, origin, "counts"));
  RoutingCounts counts(layers);
  for (int l = 0; l < layers; ++l) {
    const std::string at = "counts[" + std::to_string(l) + "]";
    RETURN_IF_ERROR(array_of(j["counts"][l], experts, origin, at));
    for (const json& c : j["counts"][l]) {
      if (!c.is_number_unsigned() && !(c.is_number_integer() && c.get<int64_t>() >= 0))
        return bad(origin, at, "expected counts >= 0, got " + c.dump());
      counts[l].push_back(c.get<uint64_t>());
    }
  }
  return counts;
}

std::string counts_to_json(const RoutingCounts& counts) {
  json j = {{"num_layers", counts.size()},
            {"num_experts", counts.empty() ? 0 : counts[0].size()},
            {"counts", counts}};
  return j.dump() + "\n";
}

}  // namespace deepinfer

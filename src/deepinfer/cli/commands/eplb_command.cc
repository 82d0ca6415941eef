// deepinfer eplb plan: EPLB's replanning command (issue 22, docs/decisions/0013). Reads routing
// counts (GET /expert_counts of each rank, summed), plans redundant copies of the hot experts
// and their ranks (model/eplb/eplb_planner.h), and writes the plan `serve --eplb-plan` loads.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/model/eplb/eplb_planner.h"

namespace {

using deepinfer::ExpertPlacement;
using deepinfer::RoutingCounts;
using deepinfer::Status;
using deepinfer::StatusOr;

StatusOr<RoutingCounts> read_counts(const std::vector<std::string>& paths) {
  RoutingCounts sum;
  for (const std::string& path : paths) {
    std::ifstream f(path);
    if (!f) return deepinfer::not_found(path + ": cannot open the counts file");
    std::stringstream ss;
    ss << f.rdbuf();
    ASSIGN_OR_RETURN(RoutingCounts c, deepinfer::parse_counts_json(ss.str(), path));
    if (sum.empty()) {
      sum = std::move(c);
      continue;
    }
    if (c.size() != sum.size() || c[0].size() != sum[0].size())
      return deepinfer::invalid_argument(path + ": " + std::to_string(c.size()) + " layers x " +
                                         std::to_string(c[0].size()) + " experts, but " + paths[0] +
                                         " has " + std::to_string(sum.size()) + " x " +
                                         std::to_string(sum[0].size()));
    for (size_t l = 0; l < c.size(); ++l)
      for (size_t e = 0; e < c[l].size(); ++e) sum[l][e] += c[l][e];
  }
  return sum;
}

// The busiest rank over the mean, worst layer: the plan's and e % ranks' (what runs without one).
void print_summary(const ExpertPlacement& p, const RoutingCounts& counts) {
  double worst_plan = 1, worst_modulo = 1;
  for (int l = 0; l < p.num_layers(); ++l) {
    const double total = std::accumulate(counts[l].begin(), counts[l].end(), 0.0);
    if (total <= 0) continue;
    const double mean = total / p.num_ranks();
    const std::vector<double> load = deepinfer::rank_loads(p, counts, l);
    std::vector<double> modulo(p.num_ranks(), 0.0);
    for (size_t e = 0; e < counts[l].size(); ++e) modulo[e % p.num_ranks()] += counts[l][e];
    worst_plan = std::max(worst_plan, *std::max_element(load.begin(), load.end()) / mean);
    worst_modulo = std::max(worst_modulo, *std::max_element(modulo.begin(), modulo.end()) / mean);
  }
  std::fprintf(stderr,
               "eplb plan: %d layers, %d experts, %d ranks x %d slots; busiest rank over the "
               "mean, worst layer: %.3f (e %% %d: %.3f)\n",
               p.num_layers(), p.num_experts(), p.num_ranks(), p.slots_per_rank(), worst_plan,
               p.num_ranks(), worst_modulo);
}

int run_eplb(int argc, char** argv) {
  CLI::App app{"Expert-parallel load balancing (EPLB): plan redundant copies of hot experts",
               "deepinfer eplb"};
  app.require_subcommand(1);
  CLI::App* plan = app.add_subcommand(
      "plan",
      "From measured routing counts, plan which experts get redundant copies and which rank "
      "holds each copy, per layer, to even out the ranks' loads; writes the JSON that "
      "`serve --eplb-plan` loads (the same file for every rank).");
  std::vector<std::string> counts_paths;
  int ranks = 0, redundant = 0;
  std::string out;
  plan->add_option("--counts", counts_paths,
                   "routing counts JSON, as GET /expert_counts serves it "
                   "({num_layers, num_experts, counts[layer][expert]}); repeat it for every "
                   "rank's counts, they are summed")
      ->required();
  plan->add_option("--ranks", ranks, "ranks of the expert-parallel group (--expert-parallel-size)")
      ->required()
      ->check(CLI::PositiveNumber);
  plan->add_option("--redundant", redundant,
                   "redundant expert copies per layer, in total over the ranks; experts + "
                   "redundant must split evenly over the ranks (each rank gets "
                   "(experts + redundant) / ranks slots)")
      ->required()
      ->check(CLI::NonNegativeNumber);
  plan->add_option("-o,--output", out, "where to write the plan (default: stdout)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  StatusOr<RoutingCounts> counts = read_counts(counts_paths);
  if (!counts.ok()) {
    std::cerr << "deepinfer eplb plan: " << counts.status().to_string() << "\n";
    return 1;
  }
  StatusOr<ExpertPlacement> placement = deepinfer::plan_placement(*counts, ranks, redundant);
  if (!placement.ok()) {
    std::cerr << "deepinfer eplb plan: " << placement.status().to_string() << "\n";
    return 1;
  }
  const std::string json = deepinfer::placement_to_json(*placement);
  if (out.empty()) {
    std::cout << json;
  } else {
    std::ofstream f(out);
    f << json;
    if (!f.flush()) {
      std::cerr << "deepinfer eplb plan: cannot write " << out << "\n";
      return 1;
    }
  }
  print_summary(*placement, *counts);
  return 0;
}

}  // namespace

DEEPINFER_REGISTER_COMMAND(eplb_command, "eplb",
                           "expert-parallel load balancing: `eplb plan` makes a plan of redundant "
                           "hot-expert copies from routing counts",
                           run_eplb);

// The planner's properties on random counts and sizes, and its balance on a skewed example
// against the e % size placement, both measured here from the counts.
#include "deepinfer/model/eplb/eplb_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

namespace deepinfer {
namespace {

RoutingCounts random_counts(std::mt19937& rng, int layers, int experts) {
  RoutingCounts c(layers, std::vector<uint64_t>(experts));
  std::uniform_real_distribution<double> skew(0.5, 3.0);
  for (auto& layer : c) {
    const double s = skew(rng);
    for (int e = 0; e < experts; ++e)  // Zipf-like, hot experts at random ids
      layer[e] = static_cast<uint64_t>(100000.0 / std::pow(1.0 + (rng() % experts), s));
  }
  return c;
}

// The largest per-rank load of a placement, from its slots alone: count / copies per slot.
double max_load(const ExpertPlacement& p, const RoutingCounts& c, int layer) {
  std::vector<int> copies(c[layer].size(), 0);
  for (int r = 0; r < p.num_ranks(); ++r)
    for (int32_t e : p.experts_on(layer, r)) ++copies[e];
  double most = 0;
  for (int r = 0; r < p.num_ranks(); ++r) {
    double load = 0;
    for (int32_t e : p.experts_on(layer, r)) load += double(c[layer][e]) / copies[e];
    most = std::max(most, load);
  }
  return most;
}

double modulo_max_load(const RoutingCounts& c, int layer, int ranks) {
  std::vector<double> load(ranks, 0);
  for (size_t e = 0; e < c[layer].size(); ++e) load[e % ranks] += double(c[layer][e]);
  return *std::max_element(load.begin(), load.end());
}

TEST(EplbPlanner, EveryPlanHoldsEveryExpertInExactSlotsWithoutDuplicates) {
  std::mt19937 rng(22);
  for (int trial = 0; trial < 300; ++trial) {
    const int experts = 4 + static_cast<int>(rng() % 29);
    const int ranks = 1 + static_cast<int>(rng() % 8);
    const int layers = 1 + static_cast<int>(rng() % 3);
    // The smallest valid redundancy, plus whole rounds of ranks.
    int redundant = (ranks - experts % ranks) % ranks + ranks * static_cast<int>(rng() % 3);
    if ((experts + redundant) / ranks > experts) redundant = (ranks - experts % ranks) % ranks;
    if ((experts + redundant) / ranks > experts) continue;
    const RoutingCounts c = random_counts(rng, layers, experts);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": E " + std::to_string(experts) + " ranks " +
                 std::to_string(ranks) + " redundant " + std::to_string(redundant));
    auto p = plan_placement(c, ranks, redundant);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    ASSERT_EQ(p->num_layers(), layers);
    ASSERT_EQ(p->num_ranks(), ranks);
    for (int l = 0; l < layers; ++l) {
      std::vector<int> copies(experts, 0);
      for (int r = 0; r < ranks; ++r) {
        const auto& on = p->experts_on(l, r);
        EXPECT_EQ(static_cast<int>(on.size()) * ranks, experts + redundant);
        EXPECT_EQ(std::set<int32_t>(on.begin(), on.end()).size(), on.size()) << "rank " << r;
        for (int32_t e : on) ++copies[e];
      }
      for (int e = 0; e < experts; ++e) {
        EXPECT_GE(copies[e], 1) << "expert " << e;
        EXPECT_LE(copies[e], ranks);
      }
      // The hottest expert (lowest id among equals) is the first one replicated.
      if (redundant > 0 && ranks > 1) {
        const int hot = static_cast<int>(std::max_element(c[l].begin(), c[l].end()) - c[l].begin());
        EXPECT_GE(copies[hot], 2) << "layer " << l;
      }
      // No rank can carry less than the mean.
      double total = 0;
      for (uint64_t x : c[l]) total += double(x);
      EXPECT_GE(max_load(*p, c, l) * (1 + 1e-12), total / ranks);
    }
    auto again = plan_placement(c, ranks, redundant);
    ASSERT_TRUE(again.ok());
    for (int l = 0; l < layers; ++l)
      for (int r = 0; r < ranks; ++r) EXPECT_EQ(again->experts_on(l, r), p->experts_on(l, r));
  }
}

TEST(EplbPlanner, ASkewedLayerIsBetterBalancedThanModuloPlacement) {
  // 16 experts on 4 ranks; experts 0 and 4 (both on rank 0 under e % 4) take most picks.
  RoutingCounts c(1, std::vector<uint64_t>(16, 100));
  c[0][0] = 5000;
  c[0][4] = 3000;
  c[0][8] = 800;
  for (int redundant : {0, 4, 8}) {
    auto p = plan_placement(c, 4, redundant);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    const double planned = max_load(*p, c, 0), modulo = modulo_max_load(c, 0, 4);
    EXPECT_LT(planned, modulo) << "redundant " << redundant;
    const std::vector<double> loads = rank_loads(*p, c, 0);
    EXPECT_DOUBLE_EQ(*std::max_element(loads.begin(), loads.end()), planned);
  }
  // More copies never make this layer's busiest rank busier.
  auto few = plan_placement(c, 4, 4), more = plan_placement(c, 4, 8);
  ASSERT_TRUE(few.ok() && more.ok());
  EXPECT_LE(max_load(*more, c, 0), max_load(*few, c, 0));
}

TEST(EplbPlanner, SizesThatDoNotSplitEvenlyAreRefusedNamingTheFlag) {
  RoutingCounts c(2, std::vector<uint64_t>(8, 1));
  auto uneven = plan_placement(c, 3, 0);
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.status().message().find("--redundant 0"), std::string::npos);
  EXPECT_NE(uneven.status().message().find("e.g. --redundant 1"), std::string::npos)
      << uneven.status().message();
  auto too_many = plan_placement(c, 2, 10);  // 9 slots per rank > 8 experts
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("--redundant 10"), std::string::npos);
  EXPECT_FALSE(plan_placement(c, 0, 0).ok());
  EXPECT_FALSE(plan_placement(c, 2, -2).ok());
  c[1].pop_back();
  auto ragged = plan_placement(c, 2, 0);
  ASSERT_FALSE(ragged.ok());
  EXPECT_NE(ragged.status().message().find("layer 1 has 7 experts"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer

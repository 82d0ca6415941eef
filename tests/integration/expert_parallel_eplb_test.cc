// EPLB on the CPU (issue 22): routing counts measured by the forward, a plan made from them with
// redundant copies of the hot experts, and ranks loading and dispatching per that plan. Every
// rank's logits and greedy tokens must stay bitwise those of one unsharded model (a replica
// computes exactly what the original does), for both families; plans that do not fit are
// refused, naming the field.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "deepinfer/backend/cpu/local_collective.h"
#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/model/deepseek_v4/expert_parallel_moe.h"
#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"
#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"
#include "deepinfer/model/eplb/eplb_planner.h"
#include "expert_parallel_util.h"

namespace deepinfer {
namespace {

const std::string& v4_dir() {
  static const std::string dir = v4::quantized_tiny_model_for_test("eplb_model", 22);
  return dir;
}

// The smallest redundancy >= 1 that splits evenly over `size` ranks.
int redundancy_for(int experts, int size) {
  for (int r = 1;; ++r)
    if ((experts + r) % size == 0) return r;
}

struct RankRun {
  Run run;
  RoutingCounts counts;
  int64_t bytes = 0;
};

template <class Model, class Options>
std::vector<RankRun> run_ranks(const std::string& dir, int size, const Options& o,
                               const std::vector<std::vector<int32_t>>& prompts) {
  auto group = cpu::make_local_group(size, /*timeout_s=*/120);
  std::vector<RankRun> got(size);
  std::vector<std::thread> ranks;
  for (int r = 0; r < size; ++r)
    ranks.emplace_back([&, r] {
      Options ro = o;
      ro.expert_group = group[r].get();
      auto m = Model::load(dir, ro);
      if (!m.ok()) {
        got[r].run.status = m.status();
        group[r]->abort(m.status().message());
        return;
      }
      got[r].bytes = (*m)->weight_bytes();
      got[r].run = run(**m, prompts[r], 6);
      got[r].counts = (*m)->routed_counts();
      if (!got[r].run.status.ok()) group[r]->abort(got[r].run.status.message());
    });
  for (auto& t : ranks) t.join();
  return got;
}

// Measure on one rank, plan with replicas for `size` ranks, run the group per the plan.
template <class Model, class Options>
void expect_planned_group_matches_one_rank(const std::string& dir, int size, Options o) {
  auto single = Model::load(dir, o);
  ASSERT_TRUE(single.ok()) << single.status().to_string();
  const auto& c = (*single)->config();
  const auto prompts = ep_prompts(size, c.vocab_size);
  std::vector<Run> want;
  std::vector<RoutingCounts> want_counts;
  for (const auto& p : prompts) {
    auto fresh = Model::load(dir, o);  // its own counters
    ASSERT_TRUE(fresh.ok());
    want.push_back(run(**fresh, p, 6));
    want_counts.push_back((*fresh)->routed_counts());
  }
  auto plan = plan_placement(want_counts[0], size, redundancy_for(c.n_routed_experts, size));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  int replicated = 0;
  for (int l = 0; l < plan->num_layers(); ++l)
    for (int e = 0; e < plan->num_experts(); ++e) replicated += plan->replicas(l, e).size() > 1;
  ASSERT_GT(replicated, 0) << "the plan has no replica to exercise";

  o.placement = std::make_shared<const ExpertPlacement>(*plan);
  const std::vector<RankRun> got = run_ranks<Model>(dir, size, o, prompts);
  for (int r = 0; r < size; ++r) {
    ASSERT_TRUE(got[r].run.status.ok()) << "rank " << r << ": " << got[r].run.status.to_string();
    EXPECT_EQ(got[r].run.tokens, want[r].tokens) << "rank " << r;
    ASSERT_EQ(got[r].run.logits.size(), want[r].logits.size());
    EXPECT_EQ(std::memcmp(got[r].run.logits.data(), want[r].logits.data(),
                          want[r].logits.size() * sizeof(float)),
              0)
        << "rank " << r << " of " << size;
    // Each rank counts its own tokens' picks: those of one model running its sequence.
    EXPECT_EQ(got[r].counts, want_counts[r]) << "rank " << r;
    if (plan->slots_per_rank() < plan->num_experts()) {
      EXPECT_LT(got[r].bytes, (*single)->weight_bytes()) << "rank " << r << " loaded every expert";
    }
  }
}

TEST(ExpertParallelEplb, TwoAndThreeRanksWithReplicasGiveOneRanksLogitsV4) {
  v4::ModelOptions o;
  o.numerics = v4::Numerics::kOfficial;
  expect_planned_group_matches_one_rank<v4::CpuModel>(v4_dir(), 2, o);
  expect_planned_group_matches_one_rank<v4::CpuModel>(v4_dir(), 3, o);
}

TEST(ExpertParallelEplb, TwoAndThreeRanksWithReplicasGiveOneRanksLogitsV41) {
  const std::string& dir = v41::tiny_model_dir_for_test(/*quantized=*/true);
  expect_planned_group_matches_one_rank<v41::CpuModel>(dir, 2, v41::ModelOptions{});
  expect_planned_group_matches_one_rank<v41::CpuModel>(dir, 3, v41::ModelOptions{});
}

TEST(ExpertParallelEplb, RoutedCountsAreEveryForwardsPicks) {
  auto m = v4::CpuModel::load(v4_dir(), v4::ModelOptions{});
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const auto& c = (*m)->config();
  const auto prompt = ep_prompts(1, c.vocab_size)[0];
  const deepinfer::Run r = run(**m, prompt, 6);
  ASSERT_TRUE(r.status.ok());
  const RoutingCounts counts = (*m)->routed_counts();
  ASSERT_EQ(static_cast<int>(counts.size()), c.num_layers);  // main layers only, not MTP
  const uint64_t forwarded = prompt.size() + r.tokens.size();
  for (int l = 0; l < c.num_layers; ++l) {
    ASSERT_EQ(static_cast<int>(counts[l].size()), c.n_routed_experts);
    EXPECT_EQ(std::accumulate(counts[l].begin(), counts[l].end(), uint64_t{0}),
              forwarded * c.experts_per_token)
        << "layer " << l;
  }
}

TEST(ExpertParallelEplb, APlanThatDoesNotFitIsRefusedNamingTheField) {
  auto single = v4::CpuModel::load(v4_dir(), v4::ModelOptions{});
  ASSERT_TRUE(single.ok());
  const auto& c = (*single)->config();
  auto group = cpu::make_local_group(2, /*timeout_s=*/5);
  auto refused = [&](int layers, int experts, int ranks, Collective* g) {
    RoutingCounts counts(layers, std::vector<uint64_t>(experts, 1));
    auto plan = plan_placement(counts, ranks, redundancy_for(experts, ranks));
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    v4::ModelOptions o;
    o.expert_group = g;
    o.placement = std::make_shared<const ExpertPlacement>(*plan);
    auto m = v4::CpuModel::load(v4_dir(), o);
    EXPECT_FALSE(m.ok());
    return m.ok() ? std::string() : m.status().message();
  };
  EXPECT_NE(refused(c.num_layers + 1, c.n_routed_experts, 2, group[0].get()).find("num_layers"),
            std::string::npos);
  EXPECT_NE(refused(c.num_layers, c.n_routed_experts * 2, 2, group[0].get()).find("num_experts"),
            std::string::npos);
  EXPECT_NE(refused(c.num_layers, c.n_routed_experts, 3, group[0].get()).find("num_ranks"),
            std::string::npos);
  EXPECT_NE(refused(c.num_layers, c.n_routed_experts, 2, nullptr).find("--expert-parallel-size"),
            std::string::npos);
}

TEST(ExpertParallelEplb, ARankKeepsTheExpertsItsPlanGivesIt) {
  // Layer 0: rank 0 holds 0, 1, 2; rank 1 holds 0, 3, 1. Layer 1: rank 0 holds 3, 0, 1.
  std::vector<std::vector<std::vector<int32_t>>> ranks = {{{0, 1, 2}, {0, 3, 1}},
                                                          {{3, 0, 1}, {2, 3, 1}}};
  auto plan = ExpertPlacement::create(4, ranks);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  for (int l = 0; l < 2; ++l)
    for (int r = 0; r < 2; ++r)
      for (int e = 0; e < 4; ++e) {
        const bool listed = std::count(ranks[l][r].begin(), ranks[l][r].end(), e) > 0;
        const std::string name =
            "layers." + std::to_string(l) + ".ffn.experts." + std::to_string(e) + ".w1.weight";
        EXPECT_EQ(v4::keeps_tensor(name, r, 2, &*plan), listed) << name << " on rank " << r;
      }
  EXPECT_TRUE(v4::keeps_tensor("layers.1.ffn.gate.weight", 0, 2, &*plan));
  EXPECT_TRUE(v4::keeps_tensor("mtp.0.ffn.experts.2.w1.weight", 0, 2, &*plan));
}

}  // namespace
}  // namespace deepinfer

// Expert parallelism on the CPU (issue 22, acceptance 1): ranks as threads of one process, each
// loading only its share of the routed experts and forwarding its own sequence (data-parallel
// attention), the MoE layers exchanging tokens through a LocalCollective. Every rank's logits
// and greedy tokens must be bitwise those of one unsharded model running the same sequence
// alone, for both families; a rank that never arrives takes the group down with an error
// naming it.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "deepinfer/backend/cpu/local_collective.h"
#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/model/deepseek_v4/expert_parallel_moe.h"
#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"
#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"

namespace deepinfer {
using v4::CpuModel;
using v4::ModelOptions;
using v4::Numerics;
using v4::SequenceState;
namespace {

const std::string& model_dir() {
  static const std::string dir = v4::quantized_tiny_model_for_test("expert_parallel_model", 22);
  return dir;
}

struct Run {
  std::vector<float> logits;  // every prompt position, then each decode step's
  std::vector<int32_t> tokens;
  Status status;
};

// Three prefill chunks of `prompt`, then `steps` greedy decode steps: the same number of
// forward calls for every prompt length, so ranks stay in step.
template <class Model>
Run run(const Model& m, const std::vector<int32_t>& prompt, int steps) {
  Run r;
  auto st = m.new_sequence();
  std::vector<float> part;
  const int64_t n = static_cast<int64_t>(prompt.size()), third = (n + 2) / 3;
  for (int64_t at = 0; at < n; at += third) {
    r.status = m.forward(st, &prompt[at], std::min(third, n - at), true, &part);
    if (!r.status.ok()) return r;
    r.logits.insert(r.logits.end(), part.begin(), part.end());
  }
  const int64_t vocab = m.config().vocab_size;
  for (int s = 0; s < steps; ++s) {
    const float* last = &r.logits[r.logits.size() - vocab];
    const int32_t next = static_cast<int32_t>(std::max_element(last, last + vocab) - last);
    r.tokens.push_back(next);
    r.status = m.forward(st, &next, 1, false, &part);
    if (!r.status.ok()) return r;
    r.logits.insert(r.logits.end(), part.begin(), part.end());
  }
  return r;
}

std::vector<std::vector<int32_t>> prompts(int count, int64_t vocab) {
  std::mt19937_64 rng(7);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> p(20 + 37 * i);  // different lengths: uneven token counts per rank
    for (auto& id : p) id = static_cast<int32_t>(2 + rng() % (vocab - 2));
    out.push_back(p);
  }
  return out;
}

template <class Model, class Options>
void expect_same_as_one_rank(const std::string& dir, int size, Options o) {
  auto single = Model::load(dir, o);
  ASSERT_TRUE(single.ok()) << single.status().to_string();
  const auto ps = prompts(size, (*single)->config().vocab_size);
  std::vector<Run> want;
  for (const auto& p : ps) want.push_back(run(**single, p, 6));

  auto group = cpu::make_local_group(size, /*timeout_s=*/120);
  std::vector<Run> got(size);
  std::vector<int64_t> bytes(size);
  std::vector<std::thread> ranks;
  for (int r = 0; r < size; ++r)
    ranks.emplace_back([&, r] {
      Options ro = o;
      ro.expert_group = group[r].get();
      auto m = Model::load(dir, ro);
      if (!m.ok()) {
        got[r].status = m.status();
        group[r]->abort(m.status().message());
        return;
      }
      bytes[r] = (*m)->weight_bytes();
      got[r] = run(**m, ps[r], 6);
      if (!got[r].status.ok()) group[r]->abort(got[r].status.message());
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < size; ++r) {
    ASSERT_TRUE(got[r].status.ok()) << "rank " << r << ": " << got[r].status.to_string();
    EXPECT_EQ(got[r].tokens, want[r].tokens) << "rank " << r;
    ASSERT_EQ(got[r].logits.size(), want[r].logits.size());
    EXPECT_EQ(std::memcmp(got[r].logits.data(), want[r].logits.data(),
                          got[r].logits.size() * sizeof(float)),
              0)
        << "rank " << r << " of " << size;
    EXPECT_LT(bytes[r], (*single)->weight_bytes()) << "rank " << r << " loaded every expert";
  }
}

ModelOptions v4_options(Numerics numerics) {
  ModelOptions o;
  o.numerics = numerics;
  return o;
}

TEST(ExpertParallel, TwoRanksGiveOneRanksLogitsAndTokensV4) {
  expect_same_as_one_rank<CpuModel>(model_dir(), 2, v4_options(Numerics::kOfficial));
}

TEST(ExpertParallel, FourRanksGiveOneRanksLogitsAndTokensV4) {
  expect_same_as_one_rank<CpuModel>(model_dir(), 4, v4_options(Numerics::kOfficial));
  expect_same_as_one_rank<CpuModel>(model_dir(), 4, v4_options(Numerics::kPlain));
}

TEST(ExpertParallel, TwoAndFourRanksGiveOneRanksLogitsAndTokensV41) {
  const std::string& dir = v41::tiny_model_dir_for_test(/*quantized=*/true);
  expect_same_as_one_rank<v41::CpuModel>(dir, 2, v41::ModelOptions{});
  expect_same_as_one_rank<v41::CpuModel>(dir, 4, v41::ModelOptions{});
}

TEST(ExpertParallel, ARankKeepsOnlyItsExperts) {
  EXPECT_TRUE(v4::keeps_tensor("layers.3.ffn.experts.5.w1.weight", 1, 2));
  EXPECT_FALSE(v4::keeps_tensor("layers.3.ffn.experts.5.w1.weight", 0, 2));
  EXPECT_TRUE(v4::keeps_tensor("layers.3.ffn.experts.12.w2.scale", 0, 4));
  EXPECT_FALSE(v4::keeps_tensor("layers.3.ffn.experts.13.w2.scale", 0, 4));
  EXPECT_TRUE(v4::keeps_tensor("layers.3.ffn.shared_experts.w1.weight", 3, 4));
  EXPECT_TRUE(v4::keeps_tensor("layers.3.ffn.gate.weight", 3, 4));
  EXPECT_TRUE(v4::keeps_tensor("mtp.0.ffn.experts.5.w1.weight", 0, 2));  // MTP stays whole
  EXPECT_TRUE(v4::keeps_tensor("layers.3.ffn.experts.5.w1.weight", 0, 1));
}

// A rank that never shows up: the other's forward fails within the timeout, naming it, and the
// group stays down.
TEST(ExpertParallel, AMissingRankTakesTheGroupDownWithAnError) {
  auto group = cpu::make_local_group(2, /*timeout_s=*/0.5);
  ModelOptions o;
  o.expert_group = group[0].get();
  auto m = CpuModel::load(model_dir(), o);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  SequenceState st = (*m)->new_sequence();
  std::vector<float> logits;
  const int32_t ids[] = {5, 6, 7};
  const Status st1 = (*m)->forward(st, ids, 3, false, &logits);
  ASSERT_FALSE(st1.ok());
  EXPECT_NE(st1.message().find("rank(s) 1 did not arrive"), std::string::npos) << st1.to_string();
  std::vector<std::string> recv;
  const Status st2 = group[1]->all_to_all({"", ""}, &recv);  // the late rank finds it down
  ASSERT_FALSE(st2.ok());
  EXPECT_NE(st2.message().find("did not arrive"), std::string::npos) << st2.to_string();
}

}  // namespace
}  // namespace deepinfer

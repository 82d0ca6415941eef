// Expert parallelism through the engine (issue 22, acceptance 1): engines as ranks of one group
// (TCP on loopback, each with its own requests: data-parallel attention, sharded experts, steps
// in lockstep). Each rank's outputs must be bitwise those of one unsharded engine running the
// same requests, for both families, with a rank that has nothing to do, with two-batch overlap
// and without; a rank that leaves takes the group down with an error instead of a hang; ranks
// on different overlap settings fail naming it; unsupported combinations are refused.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "deepinfer/base/testing/free_port.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/engine_test_util.h"
#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"

namespace deepinfer {
namespace {

const std::string& v4_model() {
  static const std::string dir = v4::quantized_tiny_model_for_test("ep_engine_model", 22);
  return dir;
}

int free_port() {
  const int port = testing::free_loopback_port();
  EXPECT_NE(port, 0) << "no free loopback port";
  return port;
}

EngineArgs args_for(const std::string& model) {
  EngineArgs a;
  a.model = model;
  a.max_num_batched_tokens = 64;  // several steps per prompt: chunked prefill in lockstep
  a.max_num_seqs = 8;
  a.kv_memory_bytes = int64_t{128} << 20;
  return a;
}

// One group of `size` engines, created together (each waits for the others to join); rank r
// gets two_batch_overlap = overlap[r] (default: on).
std::vector<std::unique_ptr<Engine>> make_group(const std::string& model, int size,
                                                const std::string& eplb_plan = "",
                                                const std::vector<bool>& overlap = {}) {
  const std::string address = "127.0.0.1:" + std::to_string(free_port());
  std::vector<std::unique_ptr<Engine>> engines(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      EngineArgs a = args_for(model);
      a.expert_parallel = {size, r, address, 60};
      a.eplb_plan = eplb_plan;
      if (!overlap.empty()) a.two_batch_overlap = overlap[r];
      auto e = Engine::create(a);
      EXPECT_TRUE(e.ok()) << "rank " << r << ": " << e.status().to_string();
      if (e.ok()) engines[r] = std::move(e).value();
    });
  for (auto& t : threads) t.join();
  return engines;
}

std::vector<GenerateRequest> requests(uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  std::vector<GenerateRequest> out;
  for (int i = 0; i < count; ++i) {
    GenerateRequest r;
    r.prompt_ids.resize(10 + rng() % 150);
    for (auto& id : r.prompt_ids) id = static_cast<int32_t>(2 + rng() % 128000);
    r.params.max_tokens = 4 + static_cast<int>(rng() % 12);
    r.params.ignore_eos = true;
    r.params.temperature = i % 2 ? 0.9f : 0.0f;
    r.params.seed = 100 + i;
    out.push_back(r);
  }
  return out;
}

void expect_same(const std::vector<RequestOutput>& got, const std::vector<RequestOutput>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].status.ok()) << what << " " << i << ": " << got[i].status.to_string();
    EXPECT_EQ(got[i].outputs.at(0).token_ids, want[i].outputs.at(0).token_ids) << what << " " << i;
  }
}

// Ranks 0..size-1 each serve their own batch (rank `idle` none); every output is the one-rank
// engine's.
void expect_group_matches_one_engine(const std::string& model, int size, int idle,
                                     bool overlap = true) {
  auto single = Engine::create(args_for(model));
  ASSERT_TRUE(single.ok()) << single.status().to_string();
  std::vector<std::vector<GenerateRequest>> work(size);
  std::vector<std::vector<RequestOutput>> want(size);
  for (int r = 0; r < size; ++r) {
    if (r == idle) continue;
    work[r] = requests(7 + r, 3 + r);
    want[r] = testing::run_batch(**single, work[r]);
  }
  auto engines = make_group(model, size, "", std::vector<bool>(size, overlap));
  for (const auto& e : engines) ASSERT_NE(e, nullptr);
  std::vector<std::vector<RequestOutput>> got(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] { got[r] = testing::run_batch(*engines[r], work[r]); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) expect_same(got[r], want[r], "rank " + std::to_string(r));
}

TEST(ExpertParallelEngine, TwoRanksServeTheirOwnRequestsAsOneEngineWouldV4) {
  expect_group_matches_one_engine(v4_model(), 2, /*idle=*/-1);
}

TEST(ExpertParallelEngine, ARankWithNothingToDoStepsWithTheOthersV4) {
  expect_group_matches_one_engine(v4_model(), 3, /*idle=*/1);
}

TEST(ExpertParallelEngine, TwoRanksServeTheirOwnRequestsAsOneEngineWouldV41) {
  expect_group_matches_one_engine(v41::tiny_model_dir_for_test(/*quantized=*/true), 2, -1);
}

TEST(ExpertParallelEngine, WithoutTwoBatchOverlapRanksServeAsOneEngineWouldV41) {
  expect_group_matches_one_engine(v41::tiny_model_dir_for_test(/*quantized=*/true), 2, -1,
                                  /*overlap=*/false);
}

// --no-two-batch-overlap on one rank only: the ranks' exchanges no longer pair up, and the
// first MoE fails on every rank naming the mismatch instead of misreading records.
TEST(ExpertParallelEngine, RanksGivenDifferentOverlapSettingsFailNamingIt) {
  auto engines = make_group(v4_model(), 2, "", {true, false});
  ASSERT_TRUE(engines[0] && engines[1]);
  auto out = engines[0]->generate(requests(5, 1)[0]);
  const Status st = out.ok() ? out->status : out.status();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("two-batch overlap on or off alike"), std::string::npos)
      << st.to_string();
}

// Rank 1 goes away while rank 0 still has work: rank 0's requests end on the group's error and
// new ones are refused, with no hang.
TEST(ExpertParallelEngine, ARankThatLeavesTakesTheGroupDown) {
  auto engines = make_group(v4_model(), 2);
  ASSERT_TRUE(engines[0] && engines[1]);
  engines[1].reset();
  GenerateRequest r = requests(3, 1)[0];
  r.params.max_tokens = 50;
  auto out = engines[0]->generate(r);
  if (out.ok()) {  // accepted before the loss was seen: it ends on the group's error
    EXPECT_FALSE(out->status.ok());
    EXPECT_NE(out->status.message().find("expert-parallel"), std::string::npos)
        << out->status.to_string();
  }
  for (int i = 0; i < 200; ++i) {  // the loop notices within a few of its 2 ms polls
    Status st = engines[0]->submit(r, [](const RequestOutput&) {});
    if (!st.ok()) {
      EXPECT_NE(st.message().find("expert-parallel group is down"), std::string::npos)
          << st.to_string();
      return;
    }
    engines[0]->cancel(r.request_id.empty() ? "req-0" : r.request_id);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "new requests were still accepted after a rank left";
}

uint64_t layer_sum(const std::vector<uint64_t>& layer) {
  return std::accumulate(layer.begin(), layer.end(), uint64_t{0});
}

// A plan by hand, from an engine's counts: rank r holds e % size == r plus one copy of the
// hottest expert of the layer (another expert where it already holds that one).
std::string write_plan(const std::vector<std::vector<uint64_t>>& counts, int size) {
  const int experts = static_cast<int>(counts[0].size());
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& layer : counts) {
    const int hot = static_cast<int>(std::max_element(layer.begin(), layer.end()) - layer.begin());
    nlohmann::json ranks = nlohmann::json::array();
    for (int r = 0; r < size; ++r) {
      std::vector<int> on;
      for (int e = r; e < experts; e += size) on.push_back(e);
      on.push_back(hot % size != r ? hot : (r + 1) % experts);
      ranks.push_back(on);
    }
    layers.push_back(ranks);
  }
  const std::string path = ::testing::TempDir() + "/eplb_plan_" + std::to_string(::getpid());
  std::ofstream(path) << nlohmann::json{
      {"num_layers", counts.size()},
      {"num_experts", experts},
      {"num_ranks", size},
      {"slots_per_rank", experts / size + 1},
      {"layers", layers}}.dump();
  return path;
}

// EPLB: one engine's routing counts (every layer counts every forwarded token's picks) give a
// plan with replicas of the hot experts; a group loading and dispatching per that plan serves
// each rank's requests as the one engine did, and the ranks' counts add up to the engine's.
TEST(ExpertParallelEngine, AGroupWithAPlanFromMeasuredCountsServesAsOneEngineWouldV4) {
  constexpr int kSize = 2;
  auto single = Engine::create(args_for(v4_model()));
  ASSERT_TRUE(single.ok()) << single.status().to_string();
  std::vector<std::vector<GenerateRequest>> work(kSize);
  std::vector<std::vector<RequestOutput>> want(kSize);
  for (int r = 0; r < kSize; ++r) {
    work[r] = requests(11 + r, 3);
    want[r] = testing::run_batch(**single, work[r]);
  }
  const std::vector<std::vector<uint64_t>> counts = (*single)->expert_counts();
  ASSERT_FALSE(counts.empty());
  for (const auto& layer : counts) {
    EXPECT_GT(layer_sum(layer), 0u);
    EXPECT_EQ(layer_sum(layer), layer_sum(counts[0])) << "every layer routes every token";
  }
  ASSERT_EQ(counts[0].size() % kSize, 0u) << "write_plan needs experts % size == 0";

  const std::string plan = write_plan(counts, kSize);
  auto engines = make_group(v4_model(), kSize, plan);
  for (const auto& e : engines) ASSERT_NE(e, nullptr);
  std::vector<std::vector<RequestOutput>> got(kSize);
  std::vector<std::thread> threads;
  for (int r = 0; r < kSize; ++r)
    threads.emplace_back([&, r] { got[r] = testing::run_batch(*engines[r], work[r]); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kSize; ++r) expect_same(got[r], want[r], "rank " + std::to_string(r));
  for (size_t l = 0; l < counts.size(); ++l)
    for (size_t e = 0; e < counts[l].size(); ++e) {
      uint64_t ranks_total = 0;
      for (const auto& engine : engines) ranks_total += engine->expert_counts()[l][e];
      EXPECT_EQ(ranks_total, counts[l][e]) << "layer " << l << " expert " << e;
    }

  EngineArgs alone = args_for(v4_model());
  alone.eplb_plan = plan;
  auto refused = Engine::create(alone);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--expert-parallel-size"), std::string::npos)
      << refused.status().to_string();
  std::remove(plan.c_str());
}

TEST(ExpertParallelEngine, RefusesWhatItCannotDoYet) {
  EngineArgs a = args_for(v4_model());
  a.expert_parallel = {2, 0, "127.0.0.1:" + std::to_string(free_port()), 1};
  a.switches.enable_mtp = true;
  auto spec = Engine::create(a);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("speculative"), std::string::npos);
  a.switches.enable_mtp = false;
  a.expert_parallel.rank = 2;
  auto rank = Engine::create(a);
  ASSERT_FALSE(rank.ok());
  EXPECT_NE(rank.status().message().find("--expert-parallel-rank"), std::string::npos);
  a.expert_parallel.rank = 0;
  a.expert_parallel.address = "nowhere";
  auto address = Engine::create(a);
  ASSERT_FALSE(address.ok());
  EXPECT_NE(address.status().message().find("--expert-parallel-address"), std::string::npos);
  a.expert_parallel.address = "127.0.0.1:" + std::to_string(free_port());
  auto lonely = Engine::create(a);  // rank 1 never comes (1 s)
  ASSERT_FALSE(lonely.ok());
  EXPECT_NE(lonely.status().message().find("did not join"), std::string::npos)
      << lonely.status().to_string();
}

}  // namespace
}  // namespace deepinfer

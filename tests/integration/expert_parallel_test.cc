// Expert parallelism on the CPU (issue 22, acceptance 1): ranks as threads of one process, each
// loading only its share of the routed experts and forwarding its own sequence (data-parallel
// attention), the MoE layers exchanging tokens through a LocalCollective. Every rank's logits
// and greedy tokens must be bitwise those of one unsharded model running the same sequence
// alone, for both families and with two-batch overlap on or off; a rank that never arrives
// takes the group down with an error naming it.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "deepinfer/backend/cpu/local_collective.h"
#include "deepinfer/backend/cpu/tcp_collective.h"
#include "deepinfer/base/testing/free_port.h"
#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/model/deepseek_v4/expert_parallel_moe.h"
#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"
#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"
#include "expert_parallel_util.h"

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

template <class Model, class Options>
void expect_same_as_one_rank(const std::string& dir, int size, Options o) {
  auto single = Model::load(dir, o);
  ASSERT_TRUE(single.ok()) << single.status().to_string();
  const auto ps = ep_prompts(size, (*single)->config().vocab_size);
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

// Two-batch overlap is on by default (the tests above); the serial exchange gives the same bits.
TEST(ExpertParallel, WithoutTwoBatchOverlapTwoAndFourRanksGiveOneRanksLogitsToo) {
  ModelOptions o = v4_options(Numerics::kOfficial);
  o.two_batch_overlap = false;
  expect_same_as_one_rank<CpuModel>(model_dir(), 2, o);
  expect_same_as_one_rank<CpuModel>(model_dir(), 4, o);
  const std::string& dir = v41::tiny_model_dir_for_test(/*quantized=*/true);
  v41::ModelOptions o41;
  o41.two_batch_overlap = false;
  expect_same_as_one_rank<v41::CpuModel>(dir, 2, o41);
  expect_same_as_one_rank<v41::CpuModel>(dir, 4, o41);
}

// A rank with nothing to run takes part through idle calls (one per forward of the others):
// 0 tokens against the other's prefill chunks and its 1-token decode steps.
void expect_idle_rank_keeps_the_others_going(bool overlap) {
  for (const bool v41_family : {false, true}) {
    auto group = cpu::make_local_group(2, /*timeout_s=*/120);
    deepinfer::Run want, got;
    Status idle_status;
    const std::string v41_dir = v41::tiny_model_dir_for_test(true);  // not thread-safe: here
    std::thread idle([&] {
      Status st;
      if (v41_family) {
        v41::ModelOptions o;
        o.expert_group = group[1].get();
        o.two_batch_overlap = overlap;
        auto m = v41::CpuModel::load(v41_dir, o);
        st = m.status();
        for (int i = 0; st.ok() && i < 9; ++i) st = (*m)->expert_parallel_idle();
      } else {
        ModelOptions o;
        o.expert_group = group[1].get();
        o.two_batch_overlap = overlap;
        auto m = CpuModel::load(model_dir(), o);
        st = m.status();
        for (int i = 0; st.ok() && i < 9; ++i) st = (*m)->expert_parallel_idle();
      }
      if (!st.ok()) group[1]->abort(st.message());
      idle_status = st;
    });
    if (v41_family) {
      const std::string& dir = v41_dir;
      auto single = v41::CpuModel::load(dir);
      ASSERT_TRUE(single.ok());
      const auto p = ep_prompts(1, (*single)->config().vocab_size)[0];
      want = run(**single, p, 6);
      v41::ModelOptions o;
      o.expert_group = group[0].get();
      o.two_batch_overlap = overlap;
      auto m = v41::CpuModel::load(dir, o);
      ASSERT_TRUE(m.ok());
      got = run(**m, p, 6);  // 3 chunks + 6 steps = 9 forwards
    } else {
      auto single = CpuModel::load(model_dir(), ModelOptions{});
      ASSERT_TRUE(single.ok());
      const auto p = ep_prompts(1, (*single)->config().vocab_size)[0];
      want = run(**single, p, 6);
      ModelOptions o;
      o.expert_group = group[0].get();
      o.two_batch_overlap = overlap;
      auto m = CpuModel::load(model_dir(), o);
      ASSERT_TRUE(m.ok());
      got = run(**m, p, 6);
    }
    idle.join();
    ASSERT_TRUE(idle_status.ok()) << idle_status.to_string();
    ASSERT_TRUE(got.status.ok()) << got.status.to_string();
    EXPECT_EQ(got.tokens, want.tokens);
    ASSERT_EQ(got.logits.size(), want.logits.size());
    EXPECT_EQ(std::memcmp(got.logits.data(), want.logits.data(), got.logits.size() * 4), 0)
        << (v41_family ? "V4.1" : "V4") << (overlap ? " with" : " without") << " overlap";
  }
}

TEST(ExpertParallel, AnIdleRankKeepsTheOthersGoing) {
  expect_idle_rank_keeps_the_others_going(/*overlap=*/true);
  expect_idle_rank_keeps_the_others_going(/*overlap=*/false);
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

int free_port() {
  const int port = testing::free_loopback_port();
  EXPECT_NE(port, 0) << "no free loopback port";
  return port;
}

pid_t spawn_rank(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, EXPERT_PARALLEL_RANK_BIN, nullptr, nullptr, argv.data(), environ), 0);
  return pid;
}

// Ranks as processes over the TCP collective: each child writes its logits and tokens, which
// must be bitwise the one-rank reference's for its sequence.
template <class Model, class Options>
void expect_processes_match_one_rank(const std::string& family, const std::string& dir, int size) {
  auto single = Model::load(dir, Options{});
  ASSERT_TRUE(single.ok()) << single.status().to_string();
  const auto ps = ep_prompts(size, (*single)->config().vocab_size);
  const std::string port = std::to_string(free_port());
  std::vector<pid_t> pids;
  std::vector<std::string> outs;
  for (int r = 0; r < size; ++r) {
    outs.push_back(::testing::TempDir() + "/ep_rank_" + family + std::to_string(r) + "_" +
                   std::to_string(::getpid()));
    pids.push_back(spawn_rank({"expert_parallel_rank", family, dir, std::to_string(r),
                               std::to_string(size), port, outs.back()}));
  }
  for (int r = 0; r < size; ++r) {
    int status = 0;
    ASSERT_EQ(::waitpid(pids[r], &status, 0), pids[r]);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << r << " failed";
  }
  for (int r = 0; r < size; ++r) {
    const Run want = run(**single, ps[r], 6);
    std::ifstream f(outs[r], std::ios::binary);
    uint64_t nl = 0, nt = 0;
    f.read(reinterpret_cast<char*>(&nl), 8);
    std::vector<float> logits(nl);
    f.read(reinterpret_cast<char*>(logits.data()), nl * sizeof(float));
    f.read(reinterpret_cast<char*>(&nt), 8);
    std::vector<int32_t> tokens(nt);
    f.read(reinterpret_cast<char*>(tokens.data()), nt * sizeof(int32_t));
    ASSERT_TRUE(f) << outs[r];
    EXPECT_EQ(tokens, want.tokens) << family << " rank " << r;
    ASSERT_EQ(logits.size(), want.logits.size());
    EXPECT_EQ(std::memcmp(logits.data(), want.logits.data(), nl * sizeof(float)), 0)
        << family << " rank " << r << " of " << size;
    std::remove(outs[r].c_str());
  }
}

TEST(ExpertParallel, RanksAsProcessesOverTcpGiveOneRanksLogits) {
  expect_processes_match_one_rank<CpuModel, ModelOptions>("v4", model_dir(), 3);
  expect_processes_match_one_rank<v41::CpuModel, v41::ModelOptions>(
      "v41", v41::tiny_model_dir_for_test(/*quantized=*/true), 2);
}

// A rank process that exits right after joining: rank 0's first forward fails with an error
// naming it instead of hanging, and the group stays down.
TEST(ExpertParallel, ARankProcessThatDiesTakesTheGroupDownCleanly) {
  const int port = free_port();
  const pid_t child = spawn_rank({"expert_parallel_rank", "v4", model_dir(), "1", "2",
                                  std::to_string(port), "/dev/null", "--exit-after-join"});
  cpu::TcpGroupOptions o;
  o.port = port;
  o.size = 2;
  o.timeout_s = 30;
  auto group = cpu::join_tcp_group(o);
  ASSERT_TRUE(group.ok()) << group.status().to_string();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ModelOptions mo;
  mo.expert_group = group->get();
  auto m = CpuModel::load(model_dir(), mo);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  SequenceState st = (*m)->new_sequence();
  std::vector<float> logits;
  const int32_t ids[] = {5, 6, 7};
  const Status first = (*m)->forward(st, ids, 3, false, &logits);
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.message().find("expert-parallel rank 1"), std::string::npos) << first.to_string();
  const Status again = (*m)->forward(st, ids, 3, false, &logits);
  ASSERT_FALSE(again.ok());
}

TEST(ExpertParallel, TcpGroupRendezvousNamesWhatIsMissing) {
  cpu::TcpGroupOptions o;
  o.port = free_port();
  o.size = 3;
  o.timeout_s = 0.5;
  auto lonely = cpu::join_tcp_group(o);
  ASSERT_FALSE(lonely.ok());
  EXPECT_NE(lonely.status().message().find("rank(s) 1, 2 did not join"), std::string::npos)
      << lonely.status().to_string();
  o.rank = 3;
  EXPECT_FALSE(cpu::join_tcp_group(o).ok());
}

}  // namespace
}  // namespace deepinfer

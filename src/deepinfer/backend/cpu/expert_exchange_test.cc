// exchange_experts over ranks as threads: with two-batch overlap and without, every pair's
// output lands in its (token, slot) with the bits the expert computes on one rank, whatever the
// ranks' token counts (0 and 1 included); `local` runs once; ranks that disagree on the schedule
// fail naming the rank instead of misreading each other's records.
#include "deepinfer/backend/cpu/expert_exchange.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "deepinfer/backend/cpu/local_collective.h"

namespace deepinfer::cpu {
namespace {

constexpr int64_t kHidden = 8;
constexpr int kExperts = 6, kSlots = 3;

// Stands in for an expert: a nonlinear function of (expert, row, weight), so a pair computed
// with the wrong row, expert or weight gives other bits.
void fake_expert(int32_t e, const float* row, float w, float* out) {
  for (int64_t d = 0; d < kHidden; ++d)
    out[d] = std::tanh(row[d] * (1.0f + 0.25f * e) + 0.125f * d) * w;
}

struct RankInput {
  std::vector<float> h;
  std::vector<ExpertPair> pairs;
  int64_t n = 0;
};

RankInput make_input(int rank, int size, int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2, 2);
  RankInput in;
  in.n = n;
  in.h.resize(n * kHidden);
  for (float& x : in.h) x = u(rng);
  for (int64_t t = 0; t < n; ++t)
    for (int k = 0; k < kSlots; ++k) {
      const int32_t e = static_cast<int32_t>(rng() % kExperts);
      in.pairs.push_back({static_cast<int32_t>(t), k, e, u(rng), (e + rank) % size});
    }
  return in;
}

std::vector<float> on_one_rank(const RankInput& in) {
  std::vector<float> want(in.n * kSlots * kHidden);
  for (const ExpertPair& p : in.pairs)
    fake_expert(p.expert, &in.h[p.token * kHidden], p.weight,
                &want[(p.token * kSlots + p.slot) * kHidden]);
  return want;
}

void expect_every_slot_filled(const std::vector<int64_t>& tokens, bool two_batch) {
  const int size = static_cast<int>(tokens.size());
  std::mt19937 rng(size * 100 + static_cast<int>(tokens[0]));
  std::vector<RankInput> in;
  for (int r = 0; r < size; ++r) in.push_back(make_input(r, size, tokens[r], rng));
  auto group = make_local_group(size, /*timeout_s=*/60);
  std::vector<std::vector<float>> got(size);
  std::vector<Status> status(size);
  std::vector<std::atomic<int>> locals(size);
  std::vector<std::thread> ranks;
  for (int r = 0; r < size; ++r)
    ranks.emplace_back([&, r] {
      got[r].assign(in[r].n * kSlots * kHidden, NAN);
      ExchangeSchedule schedule;
      schedule.two_batch = two_batch;
      schedule.local = [&] { ++locals[r]; };
      status[r] = exchange_experts(*group[r], in[r].h.data(), kHidden, in[r].n, kSlots, in[r].pairs,
                                   fake_expert, schedule, got[r].data());
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < size; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r].to_string();
    EXPECT_EQ(locals[r].load(), 1) << "rank " << r;
    const std::vector<float> want = on_one_rank(in[r]);
    ASSERT_EQ(got[r].size(), want.size());
    EXPECT_TRUE(want.empty() ||
                std::memcmp(got[r].data(), want.data(), want.size() * sizeof(float)) == 0)
        << "rank " << r << " of " << size << " with " << tokens[r] << " tokens, two_batch "
        << two_batch;
  }
}

TEST(ExpertExchange, BothSchedulesPutEveryPairsOutputInItsSlot) {
  for (const bool two_batch : {true, false}) {
    expect_every_slot_filled({5, 8}, two_batch);
    expect_every_slot_filled({0, 1}, two_batch);
    expect_every_slot_filled({1, 1}, two_batch);
    expect_every_slot_filled({0, 0}, two_batch);
    expect_every_slot_filled({3, 0, 1, 12}, two_batch);
    expect_every_slot_filled({2, 7, 0, 0}, two_batch);
  }
}

TEST(ExpertExchange, RanksOnDifferentSchedulesFailNamingTheMismatch) {
  std::mt19937 rng(3);
  std::vector<RankInput> in = {make_input(0, 2, 4, rng), make_input(1, 2, 4, rng)};
  auto group = make_local_group(2, /*timeout_s=*/60);
  std::vector<Status> status(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      std::vector<float> out(in[r].n * kSlots * kHidden);
      ExchangeSchedule schedule;
      schedule.two_batch = r == 0;
      status[r] = exchange_experts(*group[r], in[r].h.data(), kHidden, in[r].n, kSlots, in[r].pairs,
                                   fake_expert, schedule, out.data());
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(status[r].ok()) << "rank " << r;
    EXPECT_NE(status[r].message().find("another exchange"), std::string::npos)
        << status[r].to_string();
  }
}

}  // namespace
}  // namespace deepinfer::cpu

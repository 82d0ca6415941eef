#include "deepinfer/router/policy.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace deepinfer::router {
namespace {

std::vector<WorkerLoad> loads(std::vector<int64_t> outstanding, std::vector<bool> available = {}) {
  std::vector<WorkerLoad> out;
  for (size_t i = 0; i < outstanding.size(); ++i)
    out.push_back({available.empty() || available[i], outstanding[i]});
  return out;
}

size_t pick(Policy& p, std::string_view text, const std::vector<WorkerLoad>& w) {
  auto got = p.pick(text, w);
  EXPECT_TRUE(got.has_value());
  return got ? got->worker : 99;
}

TEST(Policy, ParseNamesTheFlagAndTheValue) {
  EXPECT_EQ(*parse_policy("round_robin"), PolicyKind::kRoundRobin);
  EXPECT_EQ(policy_name(*parse_policy("cache_aware")), "cache_aware");
  auto bad = parse_policy("fastest");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--policy 'fastest'"), std::string::npos);
}

TEST(RoundRobin, CyclesAndSkipsUnavailableWorkers) {
  auto p = make_round_robin_policy();
  auto all = loads({0, 0, 0});
  EXPECT_EQ(pick(*p, "", all), 0u);
  EXPECT_EQ(pick(*p, "", all), 1u);
  EXPECT_EQ(pick(*p, "", all), 2u);
  EXPECT_EQ(pick(*p, "", all), 0u);
  auto no_one = loads({0, 0, 0}, {true, false, true});
  EXPECT_EQ(pick(*p, "", no_one), 2u);  // cursor at 1, which is out
  EXPECT_EQ(pick(*p, "", no_one), 0u);
  EXPECT_FALSE(p->pick("", loads({0, 0}, {false, false})).has_value());
}

TEST(Random, DrawsUniformlyFromTheAvailableWorkers) {
  auto p = make_random_policy(7);
  std::mt19937_64 same(7);
  auto w = loads({0, 0, 0, 0}, {true, false, true, true});
  const size_t available[] = {0, 2, 3};
  std::vector<int> seen(4, 0);
  for (int i = 0; i < 300; ++i) {
    size_t got = pick(*p, "", w);
    EXPECT_EQ(got, available[same() % 3]);
    ++seen[got];
  }
  EXPECT_EQ(seen[1], 0);
  EXPECT_GT(seen[0], 50);
  EXPECT_GT(seen[2], 50);
  EXPECT_GT(seen[3], 50);
}

TEST(CacheAware, SendsARepeatedPrefixToTheWorkerThatServedIt) {
  auto p = make_cache_aware_policy(3, CacheAwareConfig{});
  auto idle = loads({0, 0, 0});
  // Empty trees tie on size (0) and load: the lowest index.
  EXPECT_EQ(pick(*p, "system: you are terse\nuser: hi", idle), 0u);
  // Nothing matched (0 of 12 bytes): the smallest tree, worker 1 (0 bytes) over worker 0.
  EXPECT_EQ(pick(*p, "other prompt", idle), 1u);
  // 22 of 31 bytes match worker 0 (0.71 > 0.5): a cache hit there, despite its bigger tree.
  auto again = p->pick("system: you are terse\nuser: yo", idle);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->worker, 0u);
  EXPECT_TRUE(again->cache_hit);
  // 6 of 16 bytes ("other ") match worker 1: 0.375 is not enough; worker 2's tree is empty.
  auto low = p->pick("other words here", idle);
  EXPECT_EQ(low->worker, 2u);
  EXPECT_FALSE(low->cache_hit);
}

TEST(CacheAware, AnImbalanceGoesToTheIdlestWorker) {
  auto p = make_cache_aware_policy(2, CacheAwareConfig{});
  EXPECT_EQ(pick(*p, "the long shared prompt", loads({0, 0})), 0u);
  // 40 - 5 > 32 and 40 > 1.5 * 5: imbalanced, so worker 1 despite worker 0's full match.
  EXPECT_EQ(pick(*p, "the long shared prompt", loads({40, 5})), 1u);
  // 40 - 10 = 30 is within the absolute threshold: balanced, and worker 1 now holds the prompt
  // too; the match ties (22 each) and fewer outstanding wins.
  EXPECT_EQ(pick(*p, "the long shared prompt", loads({40, 10})), 1u);
  EXPECT_EQ(pick(*p, "the long shared prompt", loads({3, 10})), 0u);
}

TEST(CacheAware, OnlyAvailableWorkersAndForgetDropsAWorkersPrefixes) {
  auto p = make_cache_aware_policy(2, CacheAwareConfig{});
  EXPECT_EQ(pick(*p, "abcdefgh", loads({0, 0})), 0u);
  EXPECT_EQ(pick(*p, "abcdefgh", loads({0, 0}, {false, true})), 1u);  // 0 is out (or tried)
  p->forget(1);
  // Worker 0 still matches all of it: a hit there.
  auto hit = p->pick("abcdefgh", loads({0, 0}));
  EXPECT_EQ(hit->worker, 0u);
  EXPECT_TRUE(hit->cache_hit);
  p->forget(0);
  // Nobody matches; trees: worker 0 empty after forget, worker 1 empty: the lower index.
  auto miss = p->pick("abcdefgh", loads({0, 0}));
  EXPECT_EQ(miss->worker, 0u);
  EXPECT_FALSE(miss->cache_hit);
  EXPECT_FALSE(p->pick("x", loads({0, 0}, {false, false})).has_value());
}

}  // namespace
}  // namespace deepinfer::router

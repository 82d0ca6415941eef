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
  EXPECT_EQ(*parse_policy("power_of_two", "--decode-policy"), PolicyKind::kPowerOfTwo);
  auto bad2 = parse_policy("least", "--decode-policy");
  EXPECT_NE(bad2.status().message().find("--decode-policy 'least'"), std::string::npos);
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
  auto p = make_cache_aware_policy(CacheAwareConfig{});
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
  auto p = make_cache_aware_policy(CacheAwareConfig{});
  EXPECT_EQ(pick(*p, "the long shared prompt", loads({0, 0})), 0u);
  // 40 - 5 > 32 and 40 > 1.5 * 5: imbalanced, so worker 1 despite worker 0's full match.
  EXPECT_EQ(pick(*p, "the long shared prompt", loads({40, 5})), 1u);
  // 40 - 10 = 30 is within the absolute threshold: balanced, and worker 1 now holds the prompt
  // too; the match ties (22 each) and fewer outstanding wins.
  EXPECT_EQ(pick(*p, "the long shared prompt", loads({40, 10})), 1u);
  EXPECT_EQ(pick(*p, "the long shared prompt", loads({3, 10})), 0u);
}

TEST(CacheAware, OnlyAvailableWorkersAndForgetDropsAWorkersPrefixes) {
  auto p = make_cache_aware_policy(CacheAwareConfig{});
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

TEST(CacheAware, PrefillSideBalancesOnPendingPrefillTokens) {
  auto p = make_policy(PolicyKind::kCacheAware, 0, /*prefill=*/true);
  auto with_tokens = [](int64_t a, int64_t b) {
    auto w = loads({1, 1});
    w[0].pending_prefill_tokens = a;
    w[1].pending_prefill_tokens = b;
    return w;
  };
  EXPECT_EQ(pick(*p, "a long shared system prompt", with_tokens(0, 0)), 0u);
  // 5000 - 100 = 4900 tokens is within 8192: balanced, so the prefix keeps it on worker 0.
  auto hit = p->pick("a long shared system prompt", with_tokens(5000, 100));
  EXPECT_EQ(hit->worker, 0u);
  EXPECT_TRUE(hit->cache_hit);
  // 10000 - 100 > 8192 and 10000 > 1.5 * 100: imbalanced, the one with fewer pending tokens,
  // though both have one outstanding request.
  EXPECT_EQ(pick(*p, "a long shared system prompt", with_tokens(10000, 100)), 1u);
  // The data-parallel policy weighs requests, not tokens: the same loads are balanced there.
  auto dp = make_policy(PolicyKind::kCacheAware, 0);
  EXPECT_EQ(pick(*dp, "a long shared system prompt", with_tokens(0, 0)), 0u);
  EXPECT_EQ(pick(*dp, "a long shared system prompt", with_tokens(10000, 100)), 0u);
}

WorkerLoad reported(int64_t outstanding, double kv, int64_t running, int64_t waiting,
                    int64_t max_seqs) {
  WorkerLoad w;
  w.outstanding = outstanding;
  w.load_known = true;
  w.kv_usage = kv;
  w.num_running = running;
  w.num_waiting = waiting;
  w.max_num_seqs = max_seqs;
  return w;
}

TEST(PowerOfTwo, DecodeLoadIsKvUsagePlusSequencesPerSlot) {
  EXPECT_DOUBLE_EQ(decode_load(reported(2, 0.5, 10, 0, 100)), 0.62);  // 0.5 + 12 / 100
  EXPECT_DOUBLE_EQ(decode_load(reported(0, 0.1, 30, 2, 64)), 0.6);    // 0.1 + 32 / 64
  WorkerLoad unknown;
  unknown.outstanding = 3;
  EXPECT_DOUBLE_EQ(decode_load(unknown), 3.0);  // its outstanding requests alone
  EXPECT_DOUBLE_EQ(decode_load(reported(1, 0.25, 0, 0, 0)), 1.25);  // max_num_seqs 0 counts 1
}

TEST(PowerOfTwo, KeepsTheLessLoadedOfTwoSeededDraws) {
  std::vector<WorkerLoad> w = {reported(2, 0.5, 10, 0, 100), WorkerLoad{},
                               reported(0, 0.1, 30, 2, 64), WorkerLoad{}};
  w[1].available = false;
  w[3].outstanding = 1;  // /load unknown: load 1.0
  // Loads by hand: w0 0.62, w2 0.6, w3 1.0; so of each pair: {0,2} -> 2, {0,3} -> 0, {2,3} -> 2.
  auto winner = [](size_t a, size_t b) -> size_t {
    if (a > b) std::swap(a, b);
    if (a == 0 && b == 2) return 2;
    if (a == 0 && b == 3) return 0;
    return 2;
  };
  auto p = make_power_of_two_policy(11);
  std::mt19937_64 same(11);
  const size_t available[] = {0, 2, 3};
  std::vector<int> seen(4, 0);
  for (int n = 0; n < 300; ++n) {
    size_t i = same() % 3, j = same() % 2;
    if (j >= i) ++j;
    size_t got = pick(*p, "", w);
    EXPECT_EQ(got, winner(available[i], available[j])) << n;
    ++seen[got];
  }
  EXPECT_EQ(seen[1], 0);
  EXPECT_GT(seen[0], 0);  // it wins against w3
  EXPECT_GT(seen[2], 0);
  EXPECT_EQ(seen[3], 0);  // the most loaded never wins a pair
}

TEST(PowerOfTwo, TiesGoToFewerOutstandingThenTheLowerIndexAndOneWorkerDrawsNothing) {
  // Both unknown with 2 outstanding: tie on load and outstanding -> the lower index.
  auto p = make_power_of_two_policy(5);
  EXPECT_EQ(pick(*p, "", loads({2, 2})), 0u);
  // Equal loads (0.5 + 1/2 = 1.0 each) but worker 1 has fewer outstanding.
  std::vector<WorkerLoad> tie = {reported(1, 0.5, 0, 0, 2), reported(0, 0.5, 1, 0, 2)};
  EXPECT_EQ(pick(*p, "", tie), 1u);
  // One available: it, and no draw: the next pick uses a fresh policy's first two draws.
  auto q = make_power_of_two_policy(5);
  EXPECT_EQ(pick(*q, "", loads({9, 0, 0}, {true, false, false})), 0u);
  std::mt19937_64 same(5);
  size_t i = same() % 3, j = same() % 2;
  if (j >= i) ++j;
  // Loads 0.9, 0.5, 0.1 by index: of any pair, the higher index wins.
  std::vector<WorkerLoad> three = {reported(0, 0.9, 0, 0, 1), reported(0, 0.5, 0, 0, 1),
                                   reported(0, 0.1, 0, 0, 1)};
  EXPECT_EQ(pick(*q, "", three), std::max(i, j));
  EXPECT_FALSE(q->pick("", loads({0, 0}, {false, false})).has_value());
}

}  // namespace
}  // namespace deepinfer::router

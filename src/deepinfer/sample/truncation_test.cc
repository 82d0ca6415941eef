#include "deepinfer/sample/truncation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace deepinfer::sample {
namespace {

std::vector<int32_t> all_ids(size_t n) {
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

std::vector<int32_t> kept_sorted(std::vector<int32_t> ids, int64_t n) {
  ids.resize(n);
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(TopK, KeepsTheKLargestAndTiesAtTheThreshold) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, 0.5f};
  std::vector<float> scratch(logits.size());
  auto run = [&](int k) {
    auto ids = all_ids(logits.size());
    int64_t n = top_k_filter(logits.data(), ids.data(), 5, k, scratch.data());
    return kept_sorted(ids, n);
  };
  EXPECT_EQ(run(2), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(run(3), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(run(1), (std::vector<int32_t>{1, 3}));  // 3.0 is tied, both survive
  EXPECT_EQ(run(4), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(run(0), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(run(-1), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(run(50), (std::vector<int32_t>{0, 1, 2, 3, 4}));
}

TEST(TopK, KeepsSurvivorOrder) {
  const std::vector<float> logits = {5.0f, 1.0f, 4.0f, 3.0f};
  std::vector<float> scratch(4);
  std::vector<int32_t> ids = {3, 1, 0, 2};
  int64_t n = top_k_filter(logits.data(), ids.data(), 4, 2, scratch.data());
  ids.resize(n);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 2}));
}

// probs by id: 0:0.15 1:0.5 2:0.05 3:0.3; by rank: 1, 3, 0, 2 with mass before 0, .5, .8, .95.
// The +7 shift checks that unnormalized logits are fine.
std::vector<float> shuffled_probs_logits() {
  return {std::log(0.15f) + 7, std::log(0.5f) + 7, std::log(0.05f) + 7, std::log(0.3f) + 7};
}

TEST(TopP, KeepsSmallestPrefixReachingP) {
  const auto logits = shuffled_probs_logits();
  auto run = [&](float p) {
    auto ids = all_ids(4);
    int64_t n = top_p_filter(logits.data(), ids.data(), 4, p);
    return kept_sorted(ids, n);
  };
  EXPECT_EQ(run(0.4f), (std::vector<int32_t>{1}));
  EXPECT_EQ(run(0.6f), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(run(0.9f), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(run(0.99f), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(run(1.0f), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(run(1e-6f), (std::vector<int32_t>{1}));
}

TEST(TopP, LeavesSurvivorsMostLikelyFirst) {
  const auto logits = shuffled_probs_logits();
  auto ids = all_ids(4);
  int64_t n = top_p_filter(logits.data(), ids.data(), 4, 0.9f);
  ASSERT_EQ(n, 3);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  EXPECT_EQ(ids[2], 0);
}

TEST(TopP, WorksOnASubset) {
  // Only ids 0, 2, 3 are candidates: probs 0.15, 0.05, 0.3 renormalize to 0.3, 0.1, 0.6.
  const auto logits = shuffled_probs_logits();
  std::vector<int32_t> ids = {0, 2, 3};
  int64_t n = top_p_filter(logits.data(), ids.data(), 3, 0.55f);
  EXPECT_EQ(kept_sorted(ids, n), (std::vector<int32_t>{3}));
  ids = {0, 2, 3};
  n = top_p_filter(logits.data(), ids.data(), 3, 0.65f);
  EXPECT_EQ(kept_sorted(ids, n), (std::vector<int32_t>{0, 3}));
}

TEST(MinP, KeepsTokensAtLeastMinPTimesTheMax) {
  // Relative to the max (0.5): id0 0.3, id1 1, id2 0.1, id3 0.6.
  const auto logits = shuffled_probs_logits();
  auto run = [&](float min_p) {
    auto ids = all_ids(4);
    int64_t n = min_p_filter(logits.data(), ids.data(), 4, min_p);
    return kept_sorted(ids, n);
  };
  EXPECT_EQ(run(0.5f), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(run(0.2f), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(run(0.05f), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(run(0.7f), (std::vector<int32_t>{1}));
  EXPECT_EQ(run(1.0f), (std::vector<int32_t>{1}));
  EXPECT_EQ(run(0.0f), (std::vector<int32_t>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace deepinfer::sample

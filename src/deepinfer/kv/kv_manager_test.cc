#include "deepinfer/kv/kv_manager.h"

#include <gtest/gtest.h>

#include <set>

namespace deepinfer::kv {
namespace {

// 4 tokens per page of 100 bytes; constant state 250 bytes -> 3 pages.
KvGeometry small_geometry() {
  KvGeometry g;
  g.element_bytes = 2;
  g.page_tokens = 4;
  g.bytes_per_token_x1000 = 25'000;
  g.page_bytes = 100;
  g.constant_bytes_per_seq = 250;
  return g;
}

int64_t pages_held(const KvManager& m, uint64_t seq) {
  return static_cast<int64_t>(m.block_table(seq)->size() + m.state_pages(seq)->size());
}

TEST(KvManager, CapacityFromBudget) {
  auto m = KvManager::create(small_geometry(), 1000);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const KvCapacity c = m->capacity();
  EXPECT_EQ(c.num_pages, 10);
  EXPECT_EQ(c.max_tokens, (10 - 3) * 4);
  EXPECT_EQ(c.max_sequences, 2);  // 10 / (3 + 1)
  EXPECT_EQ(m->num_free_pages(), 10);
}

TEST(KvManager, BudgetBelowOneSequenceNamesTheFlag) {
  auto m = KvManager::create(small_geometry(), 399);  // 3 pages; one seq needs 3 + 1
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("--kv-memory"), std::string::npos);
  auto just = KvManager::create(small_geometry(), 400);
  ASSERT_TRUE(just.ok());
  EXPECT_EQ(just->capacity().max_sequences, 1);
  EXPECT_EQ(just->capacity().max_tokens, 4);
}

TEST(KvManager, FlashBudgetOfExactlyOneSequence) {
  v4::Config c;
  c.num_layers = 43;
  c.head_dim = 512;
  c.sliding_window = 128;
  c.index_head_dim = 128;
  c.num_mtp_layers = 1;
  c.compress_ratios = {0, 0};
  for (int l = 2; l < 43; ++l) c.compress_ratios.push_back(l % 2 == 0 ? 4 : 128);
  c.compress_ratios.push_back(0);
  const KvGeometry g = kv_geometry(c, 2);
  // 21 constant pages + 1 token page of 880,640 B each (see kv_geometry_test).
  auto one = KvManager::create(g, 22 * 880'640);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->capacity().max_tokens, 128);
  EXPECT_EQ(one->capacity().max_sequences, 1);
  EXPECT_FALSE(KvManager::create(g, 22 * 880'640 - 1).ok());
}

TEST(KvManager, ReserveGrowsByPagesAndConstantComesFirst) {
  auto m = *KvManager::create(small_geometry(), 1000);
  EXPECT_EQ(m.pages_needed(0, 9, true), 3 + 3);
  EXPECT_EQ(m.pages_needed(8, 9, false), 1);
  EXPECT_EQ(m.pages_needed(4, 8, false), 1);
  EXPECT_EQ(m.pages_needed(9, 5, false), 0);
  EXPECT_EQ(m.block_table(1), nullptr);

  ASSERT_TRUE(m.reserve(1, 0));
  EXPECT_EQ(m.state_pages(1)->size(), 3u);
  EXPECT_TRUE(m.block_table(1)->empty());
  EXPECT_EQ(m.num_free_pages(), 7);
  ASSERT_TRUE(m.reserve(1, 5));
  EXPECT_EQ(m.block_table(1)->size(), 2u);
  ASSERT_TRUE(m.reserve(1, 8));  // still two pages
  EXPECT_EQ(m.block_table(1)->size(), 2u);
  EXPECT_EQ(m.reserved_tokens(1), 8);
  ASSERT_TRUE(m.reserve(1, 3));  // never shrinks
  EXPECT_EQ(m.block_table(1)->size(), 2u);
  ASSERT_TRUE(m.reserve(1, 9));
  EXPECT_EQ(m.block_table(1)->size(), 3u);
  EXPECT_EQ(m.num_free_pages(), 4);
}

TEST(KvManager, ExhaustionAllocatesNothing) {
  auto m = *KvManager::create(small_geometry(), 1000);
  ASSERT_TRUE(m.reserve(1, 12));  // 3 + 3
  EXPECT_EQ(m.num_free_pages(), 4);
  EXPECT_FALSE(m.reserve(2, 5));  // 3 + 2 > 4
  EXPECT_FALSE(m.contains(2));
  EXPECT_EQ(m.num_free_pages(), 4);
  ASSERT_TRUE(m.reserve(2, 4));  // 3 + 1
  EXPECT_EQ(m.num_free_pages(), 0);
  EXPECT_FALSE(m.reserve(1, 13));
  EXPECT_EQ(m.block_table(1)->size(), 3u);
  EXPECT_EQ(m.num_free_pages(), 0);
}

TEST(KvManager, FreeReturnsEveryPage) {
  auto m = *KvManager::create(small_geometry(), 1000);
  ASSERT_TRUE(m.reserve(7, 6));
  ASSERT_TRUE(m.reserve(8, 1));
  // Distinct pages, each held once.
  std::set<int32_t> seen;
  for (uint64_t s : {7u, 8u}) {
    for (int32_t p : *m.block_table(s)) seen.insert(p);
    for (int32_t p : *m.state_pages(s)) seen.insert(p);
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), pages_held(m, 7) + pages_held(m, 8));
  EXPECT_EQ(m.num_total_pages() - m.num_free_pages(), 9);
  for (int32_t p : seen) EXPECT_EQ(m.pool().refcount(p), 1);
  m.free(7);
  EXPECT_EQ(m.num_free_pages(), 6);
  EXPECT_EQ(m.block_table(7), nullptr);
  m.free(7);  // unknown now: no-op
  m.free(8);
  EXPECT_EQ(m.num_free_pages(), 10);
  for (int32_t p = 0; p < 10; ++p) EXPECT_EQ(m.pool().refcount(p), 0);
  EXPECT_EQ(m.num_sequences(), 0);
}

TEST(KvManager, RejectsGeometryWithoutPages) {
  KvGeometry g = small_geometry();
  g.page_bytes = 0;
  EXPECT_FALSE(KvManager::create(g, 1000).ok());
  g = small_geometry();
  g.page_tokens = 0;
  EXPECT_FALSE(KvManager::create(g, 1000).ok());
}

}  // namespace
}  // namespace deepinfer::kv

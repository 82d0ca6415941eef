#include "deepinfer/kv/kv_manager.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace deepinfer::kv {
namespace {

// 4 tokens per page; constant state 3 pages.
PageSpec small_spec(int64_t num_pages = 10, int64_t constant_pages = 3) {
  PageSpec s;
  s.page_tokens = 4;
  s.page_bytes = 100;
  s.constant_pages_per_seq = constant_pages;
  s.num_pages = num_pages;
  return s;
}

int64_t pages_held(const KvManager& m, uint64_t seq) {
  return static_cast<int64_t>(m.block_table(seq)->size() + m.state_pages(seq)->size());
}

// Holders per page over `seqs`; also checks the pool agrees (refcount = holders) and that pages
// in use are exactly the distinct pages held.
std::map<int32_t, int> holders(const KvManager& m, std::initializer_list<uint64_t> seqs) {
  std::map<int32_t, int> h;
  for (uint64_t s : seqs) {
    if (!m.contains(s)) continue;
    for (int32_t p : *m.state_pages(s)) ++h[p];
    for (int32_t p : *m.block_table(s)) ++h[p];
  }
  for (const auto& [p, n] : h) EXPECT_EQ(m.pool().refcount(p), n) << "page " << p;
  EXPECT_EQ(static_cast<int64_t>(h.size()), m.num_total_pages() - m.num_free_pages());
  return h;
}

TEST(KvManager, CapacityFromSpec) {
  auto m = KvManager::create(small_spec());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const KvCapacity c = m->capacity();
  EXPECT_EQ(c.num_pages, 10);
  EXPECT_EQ(c.max_tokens, (10 - 3) * 4);
  EXPECT_EQ(c.max_sequences, 2);  // 10 / (3 + 1)
  EXPECT_EQ(m->num_free_pages(), 10);
  EXPECT_EQ(m->spec().page_tokens, 4);
  EXPECT_EQ(m->spec().num_pages, 10);
}

TEST(KvManager, PoolBelowOneSequenceSaysWhatItNeeds) {
  auto m = KvManager::create(small_spec(3));  // one seq needs 3 + 1
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  const std::string msg = m.status().message();
  EXPECT_NE(msg.find("num_pages 3 can't hold one sequence"), std::string::npos) << msg;
  EXPECT_NE(msg.find("needs 4 pages"), std::string::npos) << msg;
  EXPECT_NE(msg.find("constant_pages_per_seq 3"), std::string::npos) << msg;
  EXPECT_FALSE(KvManager::create(small_spec(-5)).ok());
  auto just = KvManager::create(small_spec(4));
  ASSERT_TRUE(just.ok());
  EXPECT_EQ(just->capacity().max_sequences, 1);
  EXPECT_EQ(just->capacity().max_tokens, 4);
}

// V4-Flash bf16 at 128 tokens a page: 21 constant pages (state_geometry_test) + 1 token page.
TEST(KvManager, FlashPoolOfExactlyOneSequence) {
  PageSpec s{.page_tokens = 128, .page_bytes = 880'640, .constant_pages_per_seq = 21};
  s.num_pages = 22;
  auto one = KvManager::create(s);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->capacity().max_tokens, 128);
  EXPECT_EQ(one->capacity().max_sequences, 1);
  s.num_pages = 21;
  EXPECT_FALSE(KvManager::create(s).ok());
}

TEST(KvManager, HugePoolIsClamped) {
  auto m = KvManager::create(small_spec(KvManager::kMaxPages + 5));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->num_total_pages(), KvManager::kMaxPages);
  EXPECT_EQ(m->spec().num_pages, KvManager::kMaxPages);
}

TEST(KvManager, RejectsSpecWithoutPagesNamingTheField) {
  PageSpec s = small_spec();
  s.page_bytes = 0;
  auto m = KvManager::create(s);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("page_bytes"), std::string::npos);
  s = small_spec();
  s.page_tokens = 0;
  m = KvManager::create(s);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("page_tokens"), std::string::npos);
  s = small_spec();
  s.constant_pages_per_seq = -1;
  m = KvManager::create(s);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("constant_pages_per_seq"), std::string::npos);
}

TEST(KvManager, ZeroConstantPages) {
  auto m = *KvManager::create(small_spec(2, 0));
  EXPECT_EQ(m.capacity().max_sequences, 2);
  ASSERT_TRUE(m.reserve(1, 1));
  EXPECT_TRUE(m.state_pages(1)->empty());
  EXPECT_EQ(m.num_free_pages(), 1);
}

TEST(KvManager, ReserveGrowsByPagesAndConstantComesFirst) {
  auto m = *KvManager::create(small_spec());
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
  auto m = *KvManager::create(small_spec());
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
  auto m = *KvManager::create(small_spec());
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

// Parent: constant pages {0, 1}, token pages {2, 3, 4} for tokens 0-3, 4-7, 8-11.
KvManager forkable(int64_t num_pages = 20) {
  auto m = *KvManager::create(small_spec(num_pages, 2));
  EXPECT_TRUE(m.reserve(1, 10));
  EXPECT_EQ(*m.state_pages(1), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(*m.block_table(1), (std::vector<int32_t>{2, 3, 4}));
  return m;
}

TEST(KvManagerFork, SharesFullPagesAndCopiesConstantAndPartialPages) {
  KvManager m = forkable();
  std::vector<PageCopy> copies = {{90, 91}};  // appended to, not replaced
  ASSERT_TRUE(m.fork(1, 2, 10, &copies));
  // Fresh pages 5, 6 for the constant state, 7 for tokens 8-9 of the partly filled page 4.
  EXPECT_EQ(copies, (std::vector<PageCopy>{{90, 91}, {0, 5}, {1, 6}, {4, 7}}));
  EXPECT_EQ(*m.state_pages(2), (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(*m.block_table(2), (std::vector<int32_t>{2, 3, 7}));
  EXPECT_EQ(m.reserved_tokens(2), 12);
  EXPECT_EQ(*m.block_table(1), (std::vector<int32_t>{2, 3, 4}));  // parent unchanged
  const auto h = holders(m, {1, 2});
  EXPECT_EQ(h.at(2), 2);
  EXPECT_EQ(h.at(3), 2);
  EXPECT_EQ(h.at(4), 1);
  EXPECT_EQ(h.size(), 8u);  // a shared page counts once
  EXPECT_EQ(m.num_free_pages(), 12);
  EXPECT_EQ(m.num_sequences(), 2);
}

TEST(KvManagerFork, AtAPageBoundaryOnlyConstantPagesAreCopied) {
  KvManager m = forkable();
  std::vector<PageCopy> copies;
  ASSERT_TRUE(m.fork(1, 2, 8, &copies));
  EXPECT_EQ(copies, (std::vector<PageCopy>{{0, 5}, {1, 6}}));
  // The parent's page 4 (tokens 8-11, reserved ahead) isn't the child's.
  EXPECT_EQ(*m.block_table(2), (std::vector<int32_t>{2, 3}));
  holders(m, {1, 2});
}

TEST(KvManagerFork, InsideTheFirstPageSharesNothing) {
  KvManager m = forkable();
  std::vector<PageCopy> copies;
  ASSERT_TRUE(m.fork(1, 2, 3, &copies));
  EXPECT_EQ(copies, (std::vector<PageCopy>{{0, 5}, {1, 6}, {2, 7}}));
  EXPECT_EQ(*m.block_table(2), (std::vector<int32_t>{7}));
  EXPECT_EQ(m.pool().refcount(2), 1);
}

TEST(KvManagerFork, FreeingTheParentFirstKeepsTheSharedPages) {
  KvManager m = forkable();
  std::vector<PageCopy> copies;
  ASSERT_TRUE(m.fork(1, 2, 10, &copies));
  m.free(1);
  EXPECT_EQ(m.pool().refcount(2), 1);
  EXPECT_EQ(m.pool().refcount(3), 1);
  EXPECT_EQ(m.pool().refcount(4), 0);
  EXPECT_EQ(m.pool().refcount(0), 0);
  EXPECT_EQ(m.num_free_pages(), 15);  // 0, 1 and 4 went back
  holders(m, {1, 2});
  m.free(2);
  EXPECT_EQ(m.num_free_pages(), 20);
  for (int32_t p = 0; p < 20; ++p) EXPECT_EQ(m.pool().refcount(p), 0);
}

TEST(KvManagerFork, FreeingTheChildFirstKeepsTheParentWhole) {
  KvManager m = forkable();
  std::vector<PageCopy> copies;
  ASSERT_TRUE(m.fork(1, 2, 10, &copies));
  m.free(2);
  EXPECT_EQ(m.num_free_pages(), 15);
  for (int32_t p : {0, 1, 2, 3, 4}) EXPECT_EQ(m.pool().refcount(p), 1);
  for (int32_t p : {5, 6, 7}) EXPECT_EQ(m.pool().refcount(p), 0);
  m.free(1);
  EXPECT_EQ(m.num_free_pages(), 20);
}

TEST(KvManagerFork, ExhaustionAllocatesNothing) {
  KvManager m = forkable(7);  // 5 held, 2 free; a fork at 10 tokens needs 2 + 1
  std::vector<PageCopy> copies;
  EXPECT_FALSE(m.fork(1, 2, 10, &copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_FALSE(m.contains(2));
  EXPECT_EQ(m.num_free_pages(), 2);
  for (int32_t p : {0, 1, 2, 3, 4}) EXPECT_EQ(m.pool().refcount(p), 1);
  // At a page boundary it needs only the 2 constant pages.
  ASSERT_TRUE(m.fork(1, 2, 8, &copies));
  EXPECT_EQ(m.num_free_pages(), 0);
  holders(m, {1, 2});
}

TEST(KvManagerFork, GrowthAfterAForkTakesFreshPages) {
  KvManager m = forkable();
  std::vector<PageCopy> copies;
  ASSERT_TRUE(m.fork(1, 2, 8, &copies));  // child: {2, 3}
  EXPECT_EQ(m.pages_needed(8, 9, false), 1);
  ASSERT_TRUE(m.reserve(2, 9));
  EXPECT_EQ(*m.block_table(2), (std::vector<int32_t>{2, 3, 7}));
  EXPECT_EQ(m.pool().refcount(7), 1);
  EXPECT_EQ(m.pool().refcount(4), 1);  // the parent's own
  ASSERT_TRUE(m.reserve(1, 13));
  EXPECT_EQ(*m.block_table(1), (std::vector<int32_t>{2, 3, 4, 8}));
  holders(m, {1, 2});
}

TEST(KvManagerFork, ForkOfAForkSharesAmongAllThree) {
  KvManager m = forkable();
  std::vector<PageCopy> copies;
  ASSERT_TRUE(m.fork(1, 2, 10, &copies));
  ASSERT_TRUE(m.fork(2, 3, 9, &copies));  // the child's own partial page 7 is copied
  EXPECT_EQ(copies.back(), (PageCopy{7, 10}));
  EXPECT_EQ(m.pool().refcount(2), 3);
  EXPECT_EQ(m.pool().refcount(3), 3);
  holders(m, {1, 2, 3});
  m.free(2);
  m.free(1);
  EXPECT_EQ(m.pool().refcount(2), 1);
  holders(m, {1, 2, 3});
  m.free(3);
  EXPECT_EQ(m.num_free_pages(), 20);
}

TEST(KvManagerForkDeathTest, MisuseIsABug) {
  KvManager m = forkable();
  std::vector<PageCopy> copies;
  EXPECT_DEATH(m.fork(1, 1, 4, &copies), "CHECK failed");
  EXPECT_DEATH(m.fork(9, 2, 4, &copies), "CHECK failed");
  EXPECT_DEATH(m.fork(1, 2, 13, &copies), "CHECK failed");  // beyond the parent's pages
}

}  // namespace
}  // namespace deepinfer::kv

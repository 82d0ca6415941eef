// The device tier through KvManager: publishing a sequence's blocks, attaching a new sequence to
// a cached prefix, eviction only of pages no sequence holds, expiry, promotion and pins.
#include <gtest/gtest.h>

#include <numeric>

#include "deepinfer/kv/kv_manager.h"

namespace deepinfer::kv {
namespace {

// 4 tokens per page; constant state 2 pages.
KvManager make(int64_t num_pages) {
  PageSpec s;
  s.page_tokens = 4;
  s.page_bytes = 64;
  s.constant_pages_per_seq = 2;
  s.num_pages = num_pages;
  auto m = KvManager::create(s);
  EXPECT_TRUE(m.ok());
  return std::move(*m);
}

std::vector<UnitKey> keys_of(const std::vector<int32_t>& tokens, const char* model = "m") {
  return chain_keys(root_key(model), tokens, 4, static_cast<int64_t>(tokens.size()) / 4);
}

std::vector<int32_t> iota_tokens(int n, int start = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

constexpr int64_t kNow = 1000, kLater = 1000 + 3 * 86400;

TEST(PrefixCache, PublishedPrefixIsAttachedWithSharedPagesAndSnapshotCopies) {
  KvManager m = make(20);
  const auto tokens = iota_tokens(13);  // 3 whole blocks
  const auto keys = keys_of(tokens);
  ASSERT_TRUE(m.reserve(1, 13));
  std::vector<PageCopy> copies;
  auto pub = m.publish(1, {keys.data(), 3}, root_key("m"), /*snapshot_at_end=*/true, kLater,
                       Retention::kChat, &copies);
  ASSERT_EQ(pub.size(), 3u);
  EXPECT_TRUE(pub[0].new_unit && pub[2].new_unit);
  ASSERT_EQ(pub[2].snapshot.size(), 2u);
  const auto& state1 = *m.state_pages(1);
  EXPECT_EQ(copies, (std::vector<PageCopy>{{state1[0], pub[2].snapshot[0]},
                                           {state1[1], pub[2].snapshot[1]}}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pub[i].page, (*m.block_table(1))[i]);
  EXPECT_EQ(m.cache().stats().units, 3);
  // While seq 1 holds the block pages only the snapshot (the cache's alone) is evictable.
  EXPECT_EQ(m.cache().evictable_pages(), 2);
  EXPECT_EQ(m.num_available_pages(), m.num_free_pages() + 2);

  // A second sequence with the same 12-token prefix and more: attached at 12.
  auto t2 = tokens;
  t2.push_back(77);
  const auto k2 = keys_of(t2);
  EXPECT_EQ(m.match_prefix(k2, 13, kNow).end_tokens, 12);
  EXPECT_EQ(m.match_prefix(k2, 11, kNow).end_tokens, 0);  // the only snapshot is at 12
  std::vector<PageCopy> c2;
  EXPECT_EQ(m.attach_prefix(2, k2, 13, kNow, kLater, &c2), 12);
  ASSERT_TRUE(m.contains(2));
  EXPECT_EQ(std::vector<int32_t>(m.block_table(2)->begin(), m.block_table(2)->end()),
            std::vector<int32_t>(m.block_table(1)->begin(), m.block_table(1)->begin() + 3));
  const auto& state2 = *m.state_pages(2);
  EXPECT_EQ(c2, (std::vector<PageCopy>{{pub[2].snapshot[0], state2[0]},
                                       {pub[2].snapshot[1], state2[1]}}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(m.pool().refcount(pub[i].page), 3) << i;  // 1, 2, cache
  ASSERT_TRUE(m.reserve(2, 14));  // grows past the prefix with a fresh page
  EXPECT_EQ(m.block_table(2)->size(), 4u);
}

TEST(PrefixCache, OnlyUnitsNoSequenceHoldsAreEvictedTailFirst) {
  KvManager m = make(12);
  const auto keys = keys_of(iota_tokens(16));
  ASSERT_TRUE(m.reserve(1, 16));  // 2 constant + 4 blocks
  std::vector<PageCopy> copies;
  m.publish(1, {keys.data(), 4}, root_key("m"), true, kLater, Retention::kChat, &copies);
  EXPECT_EQ(m.num_free_pages(), 12 - 6 - 2);
  m.free(1);
  // Every unit is held by the cache alone now.
  EXPECT_EQ(m.num_free_pages(), 6);
  EXPECT_EQ(m.num_available_pages(), 12);
  // A sequence needing 2 + 2 pages takes the 6 free ones first: nothing evicted.
  ASSERT_TRUE(m.reserve(2, 8));
  EXPECT_EQ(m.cache().stats().units, 4);
  // A sequence needing 2 + 3 pages: 2 free, 3 evicted, the chain's tail (with its snapshot) first.
  ASSERT_TRUE(m.reserve(3, 12));
  EXPECT_EQ(m.cache().stats().evicted_capacity, 1);  // the last unit held 1 + 2 pages
  EXPECT_EQ(m.cache().find(keys[3]), nullptr);
  EXPECT_NE(m.cache().find(keys[2]), nullptr);
  EXPECT_EQ(m.match_prefix(keys, 16, kNow).num_units, 0);  // no snapshot left
  // The pool can't cover a sequence of 2 + 4 pages: 3 units (3 pages) are all it could evict.
  EXPECT_EQ(m.num_available_pages(), 3);
  EXPECT_FALSE(m.reserve(4, 16));
  EXPECT_EQ(m.cache().stats().units, 3);  // a refusal evicts nothing
}

TEST(PrefixCache, ExpiryDropsUnitsAndLeavesRunningSequencesTheirPages) {
  KvManager m = make(20);
  const auto keys = keys_of(iota_tokens(8));
  ASSERT_TRUE(m.reserve(1, 8));
  std::vector<PageCopy> copies;
  m.publish(1, {keys.data(), 2}, root_key("m"), true, kNow + 100, Retention::kAgent, &copies);
  EXPECT_EQ(m.match_prefix(keys, 8, kNow + 99).end_tokens, 8);
  EXPECT_EQ(m.match_prefix(keys, 8, kNow + 100).end_tokens, 0);  // expired, not yet swept
  // A hit extends: attach with a later expiry.
  std::vector<PageCopy> c2;
  ASSERT_EQ(m.attach_prefix(2, keys, 8, kNow + 50, kNow + 500, &c2), 8);
  EXPECT_EQ(m.cache().find(keys[1])->expires_at_s, kNow + 500);
  EXPECT_EQ(m.expire_cache(kNow + 499), 0);
  EXPECT_EQ(m.expire_cache(kNow + 500), 2);
  EXPECT_EQ(m.cache().stats().units, 0);
  // Sequences 1 and 2 still hold the block pages: refcount 2 each, nothing freed under them.
  EXPECT_EQ(m.pool().refcount((*m.block_table(1))[0]), 2);
  m.free(1);
  m.free(2);
  EXPECT_EQ(m.num_free_pages(), 20);
}

TEST(PrefixCache, AttachWithoutRoomForConstantPagesChangesNothing) {
  KvManager m = make(9);
  const auto keys = keys_of(iota_tokens(8));
  ASSERT_TRUE(m.reserve(1, 8));  // 4 pages
  std::vector<PageCopy> copies;
  m.publish(1, {keys.data(), 2}, root_key("m"), true, kLater, Retention::kChat, &copies);
  ASSERT_TRUE(m.reserve(5, 4));  // 3 pages; pool: 4 + 2 snapshot + 3 = 9, none free
  EXPECT_EQ(m.num_free_pages(), 0);
  std::vector<PageCopy> c2;
  // The snapshot pages are the cached unit's own; with them held there is no room left.
  EXPECT_EQ(m.attach_prefix(2, keys, 8, kNow, kLater, &c2), 0);
  EXPECT_TRUE(c2.empty());
  EXPECT_FALSE(m.contains(2));
  EXPECT_EQ(m.pool().refcount((*m.block_table(1))[0]), 2);
}

TEST(PrefixCache, AdoptedUnitsArePinnableAndEvictableAfterUnpin) {
  KvManager m = make(10);
  const auto keys = keys_of(iota_tokens(8));
  auto a = m.adopt(keys[0], root_key("m"), 4, false, kLater, Retention::kChat);
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->new_unit && a->snapshot.empty());
  ASSERT_TRUE(m.pin(keys[0]));
  auto b = m.adopt(keys[1], keys[0], 8, true, kLater, Retention::kChat);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->snapshot.size(), 2u);
  EXPECT_FALSE(m.adopt(keys[1], keys[0], 8, true, kLater, Retention::kChat).has_value());
  ASSERT_TRUE(m.pin(keys[1]));
  EXPECT_EQ(m.num_available_pages(), 10 - 4 + 2);  // pinned units are not, their snapshots are
  m.unpin(keys[1]);
  m.unpin(keys[0]);
  EXPECT_EQ(m.num_available_pages(), 10);
  std::vector<PageCopy> c;
  EXPECT_EQ(m.attach_prefix(1, keys, 8, kNow, kLater, &c), 8);
  EXPECT_EQ(*m.block_table(1), (std::vector<int32_t>{a->page, b->page}));
  // A cached unit without a snapshot gets one.
  m.free(1);
  auto c0 = m.adopt(keys[0], root_key("m"), 4, true, kLater, Retention::kChat);
  ASSERT_TRUE(c0.has_value());
  EXPECT_FALSE(c0->new_unit);
  EXPECT_EQ(m.match_prefix(keys, 7, kNow).end_tokens, 4);
  EXPECT_TRUE(m.drop_unit(keys[0]));
  EXPECT_EQ(m.match_prefix(keys, 8, kNow).end_tokens, 0);  // the chain starts at the dropped unit
}

TEST(PrefixCache, ASequenceGrowsIntoItsOwnSnapshotsPages) {
  // A long prompt snapshots at every persistence point; the snapshots of units it holds itself
  // must give way when it needs the pages, or it could never finish.
  KvManager m = make(12);
  const auto keys = keys_of(iota_tokens(40));
  ASSERT_TRUE(m.reserve(1, 8));  // 2 constant + 2 blocks
  std::vector<PageCopy> copies;
  m.publish(1, {keys.data(), 2}, root_key("m"), true, kLater, Retention::kChat, &copies);
  ASSERT_TRUE(m.reserve(1, 16));
  m.publish(1, {keys.data(), 4}, root_key("m"), true, kLater, Retention::kChat, &copies);
  EXPECT_EQ(m.num_free_pages(), 12 - 6 - 4);
  EXPECT_EQ(m.num_available_pages(), 12 - 6);
  ASSERT_TRUE(m.reserve(1, 40));  // 2 + 10 pages: both snapshots evicted
  EXPECT_EQ(m.cache().stats().snapshots, 0);
  EXPECT_EQ(m.cache().stats().units, 4);  // the units themselves are the sequence's pages
}

TEST(PrefixCache, EvictionTakesWholeUnitsBeforeSnapshotsAndSparesProtectedOnes) {
  KvManager m = make(15);
  const auto a = keys_of(iota_tokens(4)), b = keys_of(iota_tokens(4, 100));
  ASSERT_TRUE(m.reserve(1, 4));
  std::vector<PageCopy> copies;
  m.publish(1, {a.data(), 1}, root_key("m"), true, kLater, Retention::kChat, &copies);
  m.free(1);  // unit a: evictable with its snapshot (3 pages)
  ASSERT_TRUE(m.reserve(2, 4));
  m.publish(2, {b.data(), 1}, root_key("m"), true, kLater, Retention::kChat, &copies);
  // Seq 2 holds unit b; b's snapshot (2 pages) is evictable. Seq 3 is started from b.
  std::vector<PageCopy> c3;
  ASSERT_EQ(m.attach_prefix(3, b, 8, kNow, kLater, &c3), 4);
  EXPECT_EQ(m.num_free_pages(), 15 - 3 - 3 - 2 - 2);
  EXPECT_EQ(m.num_available_pages(), 5 + 3);  // b's snapshot is protected
  ASSERT_TRUE(m.reserve(4, 20));              // 2 + 5: takes unit a whole, then stops
  EXPECT_EQ(m.cache().find(a[0]), nullptr);
  EXPECT_EQ(m.cache().find(b[0])->snapshot.size(), 2u);
  EXPECT_FALSE(m.reserve(5, 4));  // nothing else may go while b's snapshot is protected
  m.clear_protected();            // the plan with seq 3's copies has run
  EXPECT_TRUE(m.reserve(5, 4));
  EXPECT_TRUE(m.cache().find(b[0])->snapshot.empty());
}

TEST(PrefixCache, MakingRoomForASnapshotNeverEvictsItsOwnUnit) {
  // Seqs 1 and 2 computed the same block; 1 published it and finished, so the cached unit is
  // 1's page, held by the cache alone: the only evictable page when 2 snapshots it.
  KvManager m = make(8);
  const auto keys = keys_of(iota_tokens(4));
  ASSERT_TRUE(m.reserve(1, 4));
  ASSERT_TRUE(m.reserve(2, 4));
  std::vector<PageCopy> copies;
  m.publish(1, {keys.data(), 1}, root_key("m"), false, kLater, Retention::kChat, &copies);
  const int32_t unit_page = (*m.block_table(1))[0];
  m.free(1);
  ASSERT_TRUE(m.reserve(3, 4));
  EXPECT_EQ(m.num_free_pages(), 1);
  EXPECT_EQ(m.num_available_pages(), 2);
  auto pub = m.publish(2, {keys.data(), 1}, root_key("m"), true, kLater, Retention::kChat, &copies);
  EXPECT_TRUE(pub.empty());  // no room for the snapshot but the unit itself
  ASSERT_NE(m.cache().find(keys[0]), nullptr);
  EXPECT_EQ(m.cache().find(keys[0])->page, unit_page);
  EXPECT_TRUE(m.cache().find(keys[0])->snapshot.empty());
  EXPECT_EQ(m.num_free_pages(), 1);
}

TEST(PrefixCache, MovedManagerKeepsItsCacheWorking) {
  KvManager a = make(10);
  const auto keys = keys_of(iota_tokens(4));
  ASSERT_TRUE(a.reserve(1, 4));
  std::vector<PageCopy> copies;
  a.publish(1, {keys.data(), 1}, root_key("m"), true, kLater, Retention::kChat, &copies);
  KvManager b = std::move(a);
  b.free(1);
  EXPECT_EQ(b.num_available_pages(), 10);
  EXPECT_TRUE(b.reserve(2, 24));  // needs every page: evicts through the moved pool
  EXPECT_EQ(b.cache().stats().units, 0);
}

}  // namespace
}  // namespace deepinfer::kv

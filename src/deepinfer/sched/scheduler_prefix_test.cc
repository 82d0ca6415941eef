// The scheduler over the prefix cache: chunks end at persistence points, a starting sequence
// attaches the longest cached prefix (its first item starts there and the plan carries the
// snapshot copies), and cached pages give way to sequences that need them.
#include <gtest/gtest.h>

#include <numeric>

#include "deepinfer/sched/scheduler.h"
#include "deepinfer/sched/scheduler_test_util.h"

namespace deepinfer::sched {
namespace {

using testing::make_config;
using testing::make_kv;
using testing::req;
using Items = std::vector<PlanItem>;

constexpr int64_t kNow = 100, kExpiry = 100 + 86400;

std::shared_ptr<const std::vector<kv::UnitKey>> keys_for(int n, int page_tokens) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), 0);
  return std::make_shared<const std::vector<kv::UnitKey>>(
      kv::chain_keys(kv::root_key("m"), t, page_tokens, n / page_tokens));
}

// Leaves the first `blocks` blocks of keys cached with a snapshot at the last, as a finished
// sequence would.
void seed_cache(kv::KvManager& kv, const std::vector<kv::UnitKey>& keys, int64_t blocks) {
  const int64_t tokens = blocks * kv.spec().page_tokens;
  ASSERT_TRUE(kv.reserve(999, tokens));
  std::vector<kv::PageCopy> copies;
  kv.publish(999, {keys.data(), static_cast<size_t>(blocks)}, kv::root_key("m"), true, kExpiry,
             kv::Retention::kChat, &copies);
  kv.free(999);
}

SchedRequest cached_req(uint64_t id, int64_t prompt, int64_t max_new,
                        std::shared_ptr<const std::vector<kv::UnitKey>> keys) {
  SchedRequest r = req(id, prompt, max_new);
  r.prefix_keys = std::move(keys);
  r.cache_now_s = kNow;
  r.cache_extend_to_s = kExpiry;
  return r;
}

TEST(SchedulerPrefix, ChunksEndAtPersistencePoints) {
  kv::KvManager kv = make_kv(16, 1, 100);
  Scheduler s(make_config(1000, 4, 2048), &kv);
  SchedRequest r = req(1, 100, 2);
  r.chunk_ends = {32, 96};
  ASSERT_TRUE(s.add(r).ok());
  EXPECT_EQ(s.schedule().items, (Items{{1, 0, 32, false}}));
  EXPECT_EQ(s.schedule().items, (Items{{1, 32, 64, false}}));
  EXPECT_EQ(s.schedule().items, (Items{{1, 96, 4, true}}));
}

TEST(SchedulerPrefix, StartingSequenceAttachesTheCachedPrefix) {
  kv::KvManager kv = make_kv(16, 2, 100);
  auto keys = keys_for(80, 16);
  seed_cache(kv, *keys, 4);  // 64 tokens cached, snapshot at 64
  Scheduler s(make_config(1000, 4, 2048), &kv);
  ASSERT_TRUE(s.add(cached_req(1, 80, 3, keys)).ok());
  const StepPlan p = s.schedule();
  PlanItem want{1, 64, 16, true};
  want.cached_tokens = 64;
  EXPECT_EQ(p.items, Items{want});
  const auto& snap = kv.cache().find((*keys)[3])->snapshot;
  const auto& state = *kv.state_pages(1);
  EXPECT_EQ(p.page_copies, (std::vector<kv::PageCopy>{{snap[0], state[0]}, {snap[1], state[1]}}));
  EXPECT_EQ(s.num_computed(1), 80);
  // The next plan carries no copies.
  s.on_token_appended(1);
  const StepPlan q = s.schedule();
  EXPECT_TRUE(q.page_copies.empty());
  EXPECT_EQ(q.items, (Items{{1, 80, 1, true}}));
}

TEST(SchedulerPrefix, AttachLeavesAtLeastOneTokenToCompute) {
  kv::KvManager kv = make_kv(16, 1, 100);
  auto keys = keys_for(64, 16);
  seed_cache(kv, *keys, 4);
  Scheduler s(make_config(1000, 4, 2048), &kv);
  ASSERT_TRUE(s.add(cached_req(1, 64, 1, keys)).ok());  // the whole prompt is cached
  // The snapshot is at 64 = the prompt: the last token must run for logits, so nothing before
  // 64 has a snapshot and nothing is attached.
  const StepPlan p = s.schedule();
  EXPECT_EQ(p.items, (Items{{1, 0, 64, true}}));
  EXPECT_TRUE(p.page_copies.empty());
}

TEST(SchedulerPrefix, ExpiredUnitsAreNotAttached) {
  kv::KvManager kv = make_kv(16, 1, 100);
  auto keys = keys_for(80, 16);
  seed_cache(kv, *keys, 4);
  Scheduler s(make_config(1000, 4, 2048), &kv);
  SchedRequest r = cached_req(1, 80, 1, keys);
  r.cache_now_s = kExpiry;
  ASSERT_TRUE(s.add(r).ok());
  EXPECT_EQ(s.schedule().items, (Items{{1, 0, 80, true}}));
}

TEST(SchedulerPrefix, CachedPagesGiveWayToAnUnrelatedSequence) {
  kv::KvManager kv = make_kv(16, 1, 8);
  auto keys = keys_for(64, 16);
  seed_cache(kv, *keys, 4);  // 4 block pages + 1 snapshot page cached, 3 free
  EXPECT_EQ(kv.num_free_pages(), 3);
  Scheduler s(make_config(1000, 4, 2048), &kv);
  ASSERT_TRUE(s.add(req(1, 100, 1)).ok());  // 1 + 7 pages: every page of the pool
  EXPECT_EQ(s.schedule().items, (Items{{1, 0, 100, true}}));
  EXPECT_EQ(kv.cache().stats().units, 0);
}

TEST(SchedulerPrefix, PartialPrefillCountsEvictablePagesAsRoom) {
  kv::KvManager kv = make_kv(16, 1, 6);
  auto keys = keys_for(64, 16);
  seed_cache(kv, *keys, 4);  // 5 pages cached, 1 free
  Scheduler s(make_config(16, 4, 2048), &kv);
  ASSERT_TRUE(s.add(req(1, 80, 1)).ok());
  // 16 tokens a step; the prefill keeps growing into evicted cache pages instead of stalling.
  int64_t pos = 0;
  for (int i = 0; i < 5; ++i) {
    const StepPlan p = s.schedule();
    ASSERT_EQ(p.items.size(), 1u) << i;
    EXPECT_EQ(p.items[0].start_pos, pos);
    pos += p.items[0].num_tokens;
  }
  EXPECT_EQ(pos, 80);
  EXPECT_EQ(s.num_preemptions(), 0);
}

}  // namespace
}  // namespace deepinfer::sched

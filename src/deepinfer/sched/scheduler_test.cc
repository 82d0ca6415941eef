#include "deepinfer/sched/scheduler.h"

#include <gtest/gtest.h>

#include <vector>

#include "deepinfer/sched/scheduler_test_util.h"

namespace deepinfer::sched {
namespace {

using testing::make_config;
using testing::make_kv;
using testing::req;
using testing::step;
using Items = std::vector<PlanItem>;

struct ChunkCase {
  int64_t budget;
  std::vector<int64_t> chunks;  // prefill chunk sizes of a 100-token prompt
};

class ChunkedPrefill : public ::testing::TestWithParam<ChunkCase> {};

TEST_P(ChunkedPrefill, ChunksFillTheBudgetAndOnlyTheLastSamples) {
  const ChunkCase& c = GetParam();
  kv::KvManager kv = make_kv(16, 1, 100);
  Scheduler s(make_config(c.budget, 4, 2048), &kv);
  ASSERT_TRUE(s.add(req(1, 100, 3)).ok());
  int64_t pos = 0;
  for (size_t i = 0; i < c.chunks.size(); ++i) {
    const StepPlan p = s.schedule();
    const bool last = i + 1 == c.chunks.size();
    ASSERT_EQ(p.items, (Items{{1, pos, c.chunks[i], last}})) << "chunk " << i;
    EXPECT_LE(p.num_tokens(), c.budget);
    pos += c.chunks[i];
    // Pages cover what was scheduled: ceil(pos / 16) + 1 constant.
    EXPECT_EQ(kv.num_total_pages() - kv.num_free_pages(), (pos + 15) / 16 + 1);
  }
  EXPECT_FALSE(s.on_token_appended(1));
  EXPECT_EQ(s.schedule().items, (Items{{1, 100, 1, true}}));
  EXPECT_FALSE(s.on_token_appended(1));
  EXPECT_EQ(s.schedule().items, (Items{{1, 101, 1, true}}));
  EXPECT_TRUE(s.on_token_appended(1));  // third token: max_new_tokens reached
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(kv.num_free_pages(), 100);
}

INSTANTIATE_TEST_SUITE_P(Budgets, ChunkedPrefill,
                         ::testing::Values(ChunkCase{16, {16, 16, 16, 16, 16, 16, 4}},
                                           ChunkCase{64, {64, 36}}, ChunkCase{1024, {100}}));

TEST(Scheduler, DecodesFirstThenPrefillChunksUnderTheBudget) {
  kv::KvManager kv = make_kv(4, 1, 100);
  Scheduler s(make_config(8, 4, 1024), &kv);
  ASSERT_TRUE(s.add(req(1, 4, 5)).ok());
  ASSERT_TRUE(s.add(req(2, 20, 2)).ok());
  EXPECT_EQ(step(s).items, (Items{{1, 0, 4, true}, {2, 0, 4, false}}));
  EXPECT_EQ(step(s).items, (Items{{1, 4, 1, true}, {2, 4, 7, false}}));
  EXPECT_EQ(step(s).items, (Items{{1, 5, 1, true}, {2, 11, 7, false}}));
  EXPECT_EQ(step(s).items, (Items{{1, 6, 1, true}, {2, 18, 2, true}}));
  EXPECT_EQ(step(s).items, (Items{{1, 7, 1, true}, {2, 20, 1, true}}));
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(kv.num_free_pages(), 100);
}

TEST(Scheduler, NoNewItemForASeqWhoseSampleIsUnreported) {
  kv::KvManager kv = make_kv(4, 1, 100);
  Scheduler s(make_config(8, 4, 1024), &kv);
  ASSERT_TRUE(s.add(req(1, 4, 5)).ok());
  EXPECT_EQ(s.schedule().items, (Items{{1, 0, 4, true}}));
  EXPECT_TRUE(s.schedule().items.empty());
  EXPECT_FALSE(s.on_token_appended(1));
  EXPECT_EQ(s.schedule().items, (Items{{1, 4, 1, true}}));
}

std::vector<uint64_t> run_order(SchedPolicy policy, const std::vector<SchedRequest>& reqs) {
  kv::KvManager kv = make_kv(4, 1, 100);
  Scheduler s(make_config(10, 4, 1024, policy), &kv);
  for (const SchedRequest& r : reqs) EXPECT_TRUE(s.add(r).ok());
  std::vector<uint64_t> order;
  while (s.has_work()) {
    const StepPlan p = step(s);
    // Each prompt is exactly the budget, so one seq runs per step.
    EXPECT_EQ(p.items.size(), 1u);
    if (p.items.empty()) break;
    order.push_back(p.items[0].seq_id);
  }
  return order;
}

TEST(Scheduler, FcfsVersusPriorityOrder) {
  const std::vector<SchedRequest> reqs = {req(1, 10, 1, 5), req(2, 10, 1, 1), req(3, 10, 1, 1)};
  EXPECT_EQ(run_order(SchedPolicy::kFcfs, reqs), (std::vector<uint64_t>{1, 2, 3}));
  // Lower value first; 2 and 3 tie and keep arrival order.
  EXPECT_EQ(run_order(SchedPolicy::kPriority, reqs), (std::vector<uint64_t>{2, 3, 1}));
  // The arrival field orders ahead of add() order.
  const std::vector<SchedRequest> late = {req(10, 10, 1, 0, 5), req(11, 10, 1, 0, 3)};
  EXPECT_EQ(run_order(SchedPolicy::kFcfs, late), (std::vector<uint64_t>{11, 10}));
}

TEST(Scheduler, MaxNumSeqsCapsRunningSequences) {
  kv::KvManager kv = make_kv(4, 1, 100);
  Scheduler s(make_config(100, 2, 1024), &kv);
  for (uint64_t id = 1; id <= 4; ++id) ASSERT_TRUE(s.add(req(id, 2, 3)).ok());
  EXPECT_EQ(step(s).items, (Items{{1, 0, 2, true}, {2, 0, 2, true}}));
  EXPECT_EQ(s.num_running(), 2);
  EXPECT_EQ(s.num_waiting(), 2);
  EXPECT_EQ(step(s).items, (Items{{1, 2, 1, true}, {2, 2, 1, true}}));
  EXPECT_EQ(step(s).items, (Items{{1, 3, 1, true}, {2, 3, 1, true}}));  // both finish
  EXPECT_EQ(s.num_running(), 0);
  EXPECT_EQ(step(s).items, (Items{{3, 0, 2, true}, {4, 0, 2, true}}));
}

void expect_rejected(const Status& st, const std::string& names) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find(names), std::string::npos) << st.message();
}

TEST(Scheduler, RejectsRequestsThatCanNeverFit) {
  // 10 pages of 4 tokens, 3 constant: at most 28 tokens of state.
  kv::KvManager kv = make_kv(4, 3, 10);
  Scheduler s(make_config(64, 4, 100), &kv);
  expect_rejected(s.add(req(1, 90, 11)), "max_model_len");
  expect_rejected(s.add(req(1, 0, 1)), "prompt_len");
  expect_rejected(s.add(req(1, 1, 0)), "max_new_tokens");
  // 20 + 10 - 1 = 29 tokens of state -> 8 pages + 3 > 10.
  expect_rejected(s.add(req(1, 20, 10)), "--kv-memory");
  EXPECT_FALSE(s.has_work());
  EXPECT_TRUE(s.add(req(1, 20, 9)).ok());  // 28 tokens -> 7 + 3 = 10
  expect_rejected(s.add(req(1, 2, 2)), "seq_id");

  kv::KvManager big = make_kv(4, 1, 100);
  SchedulerConfig c = make_config(16, 4, 100);
  c.enable_chunked_prefill = false;
  Scheduler unchunked(c, &big);
  expect_rejected(unchunked.add(req(1, 16, 2)), "max_num_batched_tokens");
  EXPECT_TRUE(unchunked.add(req(1, 16, 1)).ok());
  EXPECT_EQ(unchunked.schedule().items, (Items{{1, 0, 16, true}}));
}

TEST(Scheduler, ValidateNamesTheField) {
  SchedulerConfig c = make_config(8, 16, 100);
  expect_rejected(Scheduler::validate(c), "max_num_seqs");
  c = make_config(0, 1, 100);
  expect_rejected(Scheduler::validate(c), "max_num_batched_tokens");
  c = make_config(8, 1, 0);
  expect_rejected(Scheduler::validate(c), "max_model_len");
  EXPECT_TRUE(Scheduler::validate(make_config(8, 8, 100)).ok());
}

TEST(Scheduler, CancelMidPrefillAndMidDecodeReturnsThePool) {
  kv::KvManager kv = make_kv(4, 2, 50);
  Scheduler s(make_config(4, 4, 1024), &kv);
  ASSERT_TRUE(s.add(req(1, 20, 5)).ok());
  ASSERT_TRUE(s.add(req(2, 3, 5)).ok());
  EXPECT_EQ(step(s).items, (Items{{1, 0, 4, false}}));
  EXPECT_EQ(kv.num_free_pages(), 50 - 3);
  s.cancel(1);  // mid-prefill
  EXPECT_EQ(kv.num_free_pages(), 50);
  EXPECT_EQ(s.num_running(), 0);
  EXPECT_EQ(step(s).items, (Items{{2, 0, 3, true}}));
  EXPECT_EQ(step(s).items, (Items{{2, 3, 1, true}}));
  const StepPlan p = s.schedule();
  EXPECT_EQ(p.items, (Items{{2, 4, 1, true}}));
  s.cancel(2);  // mid-decode, while its step runs
  EXPECT_FALSE(s.on_token_appended(2));
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(kv.num_free_pages(), 50);
  s.cancel(2);  // unknown: no-op
  s.finish(2);
}

TEST(Scheduler, WaitingCancelAndFinish) {
  kv::KvManager kv = make_kv(4, 1, 50);
  Scheduler s(make_config(4, 4, 1024), &kv);
  ASSERT_TRUE(s.add(req(1, 4, 5)).ok());
  ASSERT_TRUE(s.add(req(2, 4, 5)).ok());
  s.cancel(2);  // still waiting: holds nothing
  EXPECT_EQ(s.num_waiting(), 1);
  EXPECT_EQ(step(s).items, (Items{{1, 0, 4, true}}));
  s.finish(1);  // stop token
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(kv.num_free_pages(), 50);
}

// 6 pages of 4 tokens, 1 constant: each seq may reach 15 tokens of state (5 pages), but two
// can't both pass 8 tokens.
TEST(Scheduler, PreemptsLatestArrivalWhichResumesFromZeroAndFinishes) {
  kv::KvManager kv = make_kv(4, 1, 6);
  Scheduler s(make_config(100, 4, 1024), &kv);
  ASSERT_TRUE(s.add(req(1, 4, 12)).ok());
  ASSERT_TRUE(s.add(req(2, 4, 12)).ok());
  EXPECT_EQ(step(s).items, (Items{{1, 0, 4, true}, {2, 0, 4, true}}));
  for (int64_t pos = 4; pos < 8; ++pos)
    EXPECT_EQ(step(s).items, (Items{{1, pos, 1, true}, {2, pos, 1, true}}));
  EXPECT_EQ(kv.num_free_pages(), 0);
  // Step 6: seq 1 needs a third page; seq 2 (later arrival) loses everything.
  StepPlan p = step(s);
  EXPECT_EQ(p.items, (Items{{1, 8, 1, true}}));
  EXPECT_EQ(p.preempted, (std::vector<uint64_t>{2}));
  EXPECT_EQ(s.num_computed(2), 0);
  EXPECT_EQ(s.num_generated(2), 5);
  EXPECT_EQ(s.num_waiting(), 1);
  // Seq 2 needs 1 + 3 pages to restart; only 2 are free until seq 1 ends at its 12th token.
  for (int64_t pos = 9; pos <= 14; ++pos) {
    p = step(s);
    EXPECT_EQ(p.items, (Items{{1, pos, 1, true}}));
    EXPECT_TRUE(p.preempted.empty());
  }
  EXPECT_EQ(s.num_generated(1), -1);  // finished
  EXPECT_EQ(kv.num_free_pages(), 6);
  // Re-prefill of prompt + 5 generated, then decoding resumes at position 9.
  EXPECT_EQ(step(s).items, (Items{{2, 0, 9, true}}));
  for (int64_t pos = 9; pos < 15; ++pos) EXPECT_EQ(step(s).items, (Items{{2, pos, 1, true}}));
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(kv.num_free_pages(), 6);
  EXPECT_EQ(s.num_preemptions(), 1);
}

TEST(Scheduler, PriorityPolicyPreemptsTheLowerPriority) {
  kv::KvManager kv = make_kv(4, 1, 6);
  Scheduler s(make_config(100, 4, 1024, SchedPolicy::kPriority), &kv);
  ASSERT_TRUE(s.add(req(1, 4, 12, /*priority=*/3)).ok());
  ASSERT_TRUE(s.add(req(2, 4, 12, /*priority=*/1)).ok());
  EXPECT_EQ(step(s).items, (Items{{2, 0, 4, true}, {1, 0, 4, true}}));
  for (int64_t pos = 4; pos < 8; ++pos) step(s);
  const StepPlan p = step(s);
  EXPECT_EQ(p.items, (Items{{2, 8, 1, true}}));
  EXPECT_EQ(p.preempted, (std::vector<uint64_t>{1}));
}

// A re-prefill longer than the budget goes in chunks and samples only at its end. On the way,
// seq 2 is readmitted with a chunk that fits the two free pages, can't grow once they are used,
// and, being the lowest, preempts itself.
TEST(Scheduler, ChunkedRePrefillSamplesOnlyAtTheEnd) {
  kv::KvManager kv = make_kv(4, 1, 6);
  Scheduler s(make_config(4, 2, 1024), &kv);
  ASSERT_TRUE(s.add(req(1, 4, 12)).ok());
  ASSERT_TRUE(s.add(req(2, 4, 12)).ok());
  EXPECT_EQ(step(s).items, (Items{{1, 0, 4, true}}));
  EXPECT_EQ(step(s).items, (Items{{1, 4, 1, true}, {2, 0, 3, false}}));
  EXPECT_EQ(step(s).items, (Items{{1, 5, 1, true}, {2, 3, 1, true}}));
  EXPECT_EQ(step(s).items, (Items{{1, 6, 1, true}, {2, 4, 1, true}}));
  EXPECT_EQ(step(s).items, (Items{{1, 7, 1, true}, {2, 5, 1, true}}));
  StepPlan p = step(s);
  EXPECT_EQ(p.items, (Items{{1, 8, 1, true}}));
  EXPECT_EQ(p.preempted, (std::vector<uint64_t>{2}));
  EXPECT_EQ(s.num_generated(2), 3);  // known: 4 + 3 = 7
  EXPECT_EQ(step(s).items, (Items{{1, 9, 1, true}, {2, 0, 3, false}}));
  EXPECT_EQ(step(s).items, (Items{{1, 10, 1, true}, {2, 3, 1, false}}));
  p = step(s);
  EXPECT_EQ(p.items, (Items{{1, 11, 1, true}}));
  EXPECT_EQ(p.preempted, (std::vector<uint64_t>{2}));
  // Seq 1's fourth page leaves one free: too few for seq 2's constant page + one more.
  for (int64_t pos = 12; pos <= 14; ++pos) EXPECT_EQ(step(s).items, (Items{{1, pos, 1, true}}));
  EXPECT_EQ(step(s).items, (Items{{2, 0, 4, false}}));
  EXPECT_EQ(step(s).items, (Items{{2, 4, 3, true}}));
  EXPECT_EQ(s.num_generated(2), 4);
  EXPECT_EQ(s.num_preemptions(), 2);
}

// A high-priority prefill that finds the pool empty takes the pages of a lower-priority decode
// already placed in this step's plan: that item is withdrawn and its tokens go back to the budget.
TEST(Scheduler, PreemptingAScheduledDecodeWithdrawsItsItem) {
  kv::KvManager kv = make_kv(4, 1, 8);
  Scheduler s(make_config(8, 4, 1024, SchedPolicy::kPriority), &kv);
  ASSERT_TRUE(s.add(req(1, 4, 16, /*priority=*/9)).ok());
  EXPECT_EQ(step(s).items, (Items{{1, 0, 4, true}}));
  ASSERT_TRUE(s.add(req(2, 24, 1, /*priority=*/0)).ok());
  EXPECT_EQ(step(s).items, (Items{{1, 4, 1, true}, {2, 0, 7, false}}));
  EXPECT_EQ(step(s).items, (Items{{1, 5, 1, true}, {2, 7, 7, false}}));
  // Two tokens of room left in seq 2's pages: it takes them rather than preempting.
  EXPECT_EQ(step(s).items, (Items{{1, 6, 1, true}, {2, 14, 2, false}}));
  EXPECT_EQ(kv.num_free_pages(), 0);
  const StepPlan p = step(s);
  EXPECT_EQ(p.items, (Items{{2, 16, 7, false}}));
  EXPECT_EQ(p.preempted, (std::vector<uint64_t>{1}));
  EXPECT_EQ(s.num_computed(1), 0);
  EXPECT_EQ(s.num_generated(1), 4);
  EXPECT_EQ(step(s).items, (Items{{2, 23, 1, true}}));  // seq 2 finishes; seq 1 can't fit yet
  EXPECT_EQ(step(s).items, (Items{{1, 0, 8, true}}));   // prompt 4 + 4 generated
}

// n > 1 sampling: the child shares the parent's prompt pages, samples from the parent's logits
// (reported like any sample) and then decodes alongside it.
TEST(SchedulerFork, ChildSharesThePromptAndDecodesNext) {
  kv::KvManager kv = make_kv(4, 1, 100);
  Scheduler s(make_config(100, 4, 1024), &kv);
  ASSERT_TRUE(s.add(req(1, 10, 3)).ok());
  EXPECT_EQ(s.schedule().items, (Items{{1, 0, 10, true}}));
  std::vector<kv::PageCopy> copies;
  auto forked = s.fork(1, req(2, 10, 3), &copies);
  ASSERT_TRUE(forked.ok()) << forked.status().to_string();
  EXPECT_TRUE(*forked);
  // The constant page and the half-filled third page are copied; the first two are shared.
  const std::vector<int32_t>& parent = *kv.block_table(1);
  const std::vector<int32_t>& child = *kv.block_table(2);
  EXPECT_EQ((std::vector<kv::PageCopy>{{(*kv.state_pages(1))[0], (*kv.state_pages(2))[0]},
                                       {parent[2], child[2]}}),
            copies);
  EXPECT_EQ(child[0], parent[0]);
  EXPECT_EQ(child[1], parent[1]);
  EXPECT_EQ(kv.pool().refcount(parent[0]), 2);
  EXPECT_EQ(s.num_running(), 2);
  EXPECT_EQ(s.num_computed(2), 10);
  EXPECT_EQ(s.num_generated(2), 0);
  // Its sample is owed: no item until it is reported.
  EXPECT_FALSE(s.on_token_appended(1));
  EXPECT_EQ(step(s).items, (Items{{1, 10, 1, true}}));
  EXPECT_FALSE(s.on_token_appended(2));
  EXPECT_EQ(step(s).items, (Items{{1, 11, 1, true}, {2, 10, 1, true}}));
  EXPECT_EQ(s.num_generated(1), -1);  // 3 tokens: finished
  EXPECT_EQ(step(s).items, (Items{{2, 11, 1, true}}));
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(kv.num_free_pages(), 100);
}

// Disaggregation: a sequence whose prompt was computed elsewhere starts running with its pages
// reserved and its first sample owed, then decodes from its prompt's end.
TEST(SchedulerPrefilled, StartsRunningWithItsSampleOwedAndDecodesNext) {
  kv::KvManager kv = make_kv(4, 1, 100);
  Scheduler s(make_config(100, 4, 1024), &kv);
  auto started = s.add_prefilled(req(1, 10, 3));
  ASSERT_TRUE(started.ok()) << started.status().to_string();
  EXPECT_TRUE(*started);
  EXPECT_EQ(kv.state_pages(1)->size(), 1u);
  EXPECT_EQ(kv.block_table(1)->size(), 3u);  // 10 tokens in pages of 4
  EXPECT_EQ(s.num_running(), 1);
  EXPECT_EQ(s.num_computed(1), 10);
  EXPECT_TRUE(s.schedule().items.empty());  // its sample is owed: nothing until it is reported
  EXPECT_FALSE(s.on_token_appended(1));
  EXPECT_EQ(step(s).items, (Items{{1, 10, 1, true}}));
  EXPECT_EQ(step(s).items, (Items{{1, 11, 1, true}}));
  EXPECT_FALSE(s.has_work());  // 3 tokens
  EXPECT_EQ(kv.num_free_pages(), 100);
}

TEST(SchedulerPrefilled, NoSlotOrNoPagesMeansFalseAndNothingChanged) {
  kv::KvManager kv = make_kv(4, 1, 6);
  Scheduler s(make_config(100, 1, 1024), &kv);
  ASSERT_TRUE(*s.add_prefilled(req(1, 4, 2)));  // 1 + 1 pages
  auto no_slot = s.add_prefilled(req(2, 4, 2));
  ASSERT_TRUE(no_slot.ok());
  EXPECT_FALSE(*no_slot);
  Scheduler wide(make_config(100, 4, 1024), &kv);
  auto no_pages = wide.add_prefilled(req(3, 17, 2));  // 1 + 5 pages, 4 free
  ASSERT_TRUE(no_pages.ok());
  EXPECT_FALSE(*no_pages);
  EXPECT_EQ(kv.num_free_pages(), 4);
  EXPECT_FALSE(kv.contains(3));
  EXPECT_FALSE(s.add_prefilled(req(4, 0, 2)).ok());  // could never run: add()'s error
}

TEST(SchedulerFork, ChildOfOneTokenFinishesOnItsFirstSample) {
  kv::KvManager kv = make_kv(4, 1, 100);
  Scheduler s(make_config(100, 4, 1024), &kv);
  ASSERT_TRUE(s.add(req(1, 4, 2)).ok());
  s.schedule();
  std::vector<kv::PageCopy> copies;
  ASSERT_TRUE(*s.fork(1, req(2, 4, 1), &copies));
  EXPECT_EQ(copies.size(), 1u);  // constant page only: the prompt fills its page
  EXPECT_TRUE(s.on_token_appended(2));
  EXPECT_FALSE(s.on_token_appended(1));
  EXPECT_EQ(s.num_running(), 1);
  EXPECT_EQ(step(s).items, (Items{{1, 4, 1, true}}));
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(kv.num_free_pages(), 100);
}

TEST(SchedulerFork, NoSlotNoPagesOrNoPromptStateMeansFalseAndNothingChanged) {
  kv::KvManager kv = make_kv(4, 1, 5);
  Scheduler s(make_config(100, 2, 1024), &kv);
  ASSERT_TRUE(s.add(req(1, 10, 3)).ok());
  s.schedule();
  // Parent: 1 + 3 pages; the child needs 1 + 1 fresh but one is free.
  std::vector<kv::PageCopy> copies;
  auto r = s.fork(1, req(2, 10, 3), &copies);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(s.num_running(), 1);
  EXPECT_EQ(s.num_generated(2), -1);
  EXPECT_EQ(kv.num_free_pages(), 1);
  // The caller adds it instead: it waits for pages and recomputes its prompt.
  ASSERT_TRUE(s.add(req(2, 10, 3)).ok());
  EXPECT_EQ(s.num_waiting(), 1);

  kv::KvManager roomy = make_kv(4, 1, 100);
  Scheduler one(make_config(100, 1, 1024), &roomy);
  ASSERT_TRUE(one.add(req(1, 10, 3)).ok());
  one.schedule();
  EXPECT_FALSE(*one.fork(1, req(2, 10, 3), &copies));  // max_num_seqs
  EXPECT_EQ(roomy.num_free_pages(), 100 - 4);

  kv::KvManager roomy2 = make_kv(4, 1, 100);
  Scheduler two(make_config(100, 4, 1024), &roomy2);
  ASSERT_TRUE(two.add(req(1, 10, 3)).ok());
  EXPECT_FALSE(*two.fork(1, req(2, 10, 3), &copies));  // waiting: holds no state
  two.schedule();
  EXPECT_FALSE(*two.fork(7, req(2, 10, 3), &copies));  // unknown parent (cancelled)
  EXPECT_FALSE(*two.fork(1, req(2, 9, 3), &copies));   // not the parent's computed length
  two.on_token_appended(1);
  step(two);
  EXPECT_FALSE(*two.fork(1, req(2, 10, 3), &copies));  // the parent moved past its prompt
  EXPECT_EQ(two.num_running(), 1);
  EXPECT_EQ(roomy2.num_free_pages(), 100 - 4);
  EXPECT_TRUE(copies.empty());
}

TEST(SchedulerFork, RejectsWhatAddRejects) {
  kv::KvManager kv = make_kv(4, 1, 10);
  Scheduler s(make_config(100, 4, 64), &kv);
  ASSERT_TRUE(s.add(req(1, 10, 3)).ok());
  s.schedule();
  std::vector<kv::PageCopy> copies;
  for (const SchedRequest& bad : {req(1, 10, 3), req(2, 10, 0), req(2, 10, 60), req(2, 10, 30)}) {
    auto r = s.fork(1, bad, &copies);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), s.add(bad).message());
  }
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(s.num_running(), 1);
}

// As PreemptsLatestArrivalWhichResumesFromZeroAndFinishes, with seq 2 forked from seq 1: it
// shares seq 1's first token page, so both fit until seq 1 needs a third page of its own.
TEST(SchedulerFork, PreemptedChildRecomputesFromZero) {
  kv::KvManager kv = make_kv(4, 1, 6);
  Scheduler s(make_config(100, 4, 1024), &kv);
  ASSERT_TRUE(s.add(req(1, 4, 12)).ok());
  EXPECT_EQ(s.schedule().items, (Items{{1, 0, 4, true}}));
  std::vector<kv::PageCopy> copies;
  ASSERT_TRUE(*s.fork(1, req(2, 4, 12), &copies));
  const int32_t shared = (*kv.block_table(1))[0];
  EXPECT_EQ(kv.num_free_pages(), 3);
  s.on_token_appended(1);
  s.on_token_appended(2);
  for (int64_t pos = 4; pos < 8; ++pos)
    EXPECT_EQ(step(s).items, (Items{{1, pos, 1, true}, {2, pos, 1, true}}));
  EXPECT_EQ(kv.num_free_pages(), 1);
  StepPlan p = step(s);
  EXPECT_EQ(p.items, (Items{{1, 8, 1, true}}));
  EXPECT_EQ(p.preempted, (std::vector<uint64_t>{2}));
  EXPECT_EQ(kv.pool().refcount(shared), 1);
  EXPECT_EQ(s.num_computed(2), 0);
  EXPECT_EQ(s.num_generated(2), 5);
  for (int64_t pos = 9; pos <= 14; ++pos) EXPECT_EQ(step(s).items, (Items{{1, pos, 1, true}}));
  EXPECT_EQ(kv.num_free_pages(), 6);
  EXPECT_EQ(step(s).items, (Items{{2, 0, 9, true}}));
  for (int64_t pos = 9; pos < 15; ++pos) EXPECT_EQ(step(s).items, (Items{{2, pos, 1, true}}));
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(kv.num_free_pages(), 6);
}

}  // namespace
}  // namespace deepinfer::sched

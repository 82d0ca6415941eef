// Randomized runs against an independent model of every sequence: random pool shapes, budgets,
// policies, lengths, early stops and cancellations, with the plan's invariants checked each step.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "deepinfer/sched/scheduler.h"
#include "deepinfer/sched/scheduler_test_util.h"

namespace deepinfer::sched {
namespace {

struct Model {
  int64_t prompt = 0, max_new = 0;
  int64_t generated = 0, computed = 0;
  bool awaiting = false;
  int64_t known() const { return prompt + generated; }
};

class SchedulerSim : public ::testing::TestWithParam<int> {};

TEST_P(SchedulerSim, InvariantsHoldEveryStepAndThePoolEndsFull) {
  std::mt19937_64 rng(GetParam());
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };

  const int page_tokens = std::vector<int>{1, 4, 16}[uniform(0, 2)];
  const int64_t constant_pages = uniform(0, 3);
  SchedulerConfig cfg;
  // One running seq can't be preempted: tight (odd) seeds run at least two.
  cfg.max_num_seqs = static_cast<int>(uniform(GetParam() % 2 ? 2 : 1, 12));
  cfg.max_num_batched_tokens = uniform(cfg.max_num_seqs, 200);
  cfg.max_model_len = uniform(20, 300);
  // Odd seeds get a pool of one to two of the longest sequences, so preemption is common; even
  // seeds up to ten.
  const int64_t longest = (cfg.max_model_len + page_tokens - 1) / page_tokens;
  const int64_t num_pages =
      std::max(2 * (constant_pages + 1),
               constant_pages + (GetParam() % 2 ? uniform(longest / 2 + 1, 2 * longest)
                                                : uniform(longest, 10 * longest)));
  cfg.policy = chance(0.5) ? SchedPolicy::kPriority : SchedPolicy::kFcfs;
  cfg.enable_chunked_prefill = !chance(0.25);
  // Unchunked, a budget below the model length would reject most requests.
  if (!cfg.enable_chunked_prefill) cfg.max_num_batched_tokens += cfg.max_model_len;
  ASSERT_TRUE(Scheduler::validate(cfg).ok());
  kv::KvManager kv = testing::make_kv(page_tokens, constant_pages, num_pages);
  Scheduler s(cfg, &kv);

  std::map<uint64_t, Model> live;
  int64_t completed = 0, cancelled = 0, stopped = 0, rejected = 0;
  uint64_t next_id = 1;
  const uint64_t num_requests = 150;
  int64_t steps = 0;
  for (; steps < 100'000; ++steps) {
    for (int64_t k = uniform(0, 2); k > 0 && next_id <= num_requests; --k) {
      // Some requests are too long for the model or the pool, on purpose.
      SchedRequest r = testing::req(next_id++, uniform(1, cfg.max_model_len * 2 / 3),
                                    uniform(1, cfg.max_model_len / 2),
                                    static_cast<int>(uniform(0, 3)), uniform(0, steps));
      const int64_t state = r.prompt_len + r.max_new_tokens - 1;
      const bool fits = r.prompt_len + r.max_new_tokens <= cfg.max_model_len &&
                        (cfg.enable_chunked_prefill || state <= cfg.max_num_batched_tokens) &&
                        constant_pages + (state + page_tokens - 1) / page_tokens <= num_pages;
      const Status st = s.add(r);
      ASSERT_EQ(st.ok(), fits) << st.to_string();
      if (st.ok()) {
        live[r.seq_id] = Model{r.prompt_len, r.max_new_tokens};
      } else {
        ++rejected;
      }
    }
    if (next_id > num_requests && !s.has_work()) break;

    const StepPlan plan = s.schedule();
    ASSERT_LE(plan.num_tokens(), cfg.max_num_batched_tokens);
    ASSERT_LE(s.num_running(), cfg.max_num_seqs);
    ASSERT_EQ(kv.num_sequences(), s.num_running());
    std::set<uint64_t> seen;
    for (uint64_t id : plan.preempted) {
      ASSERT_TRUE(seen.insert(id).second);
      ASSERT_TRUE(live.count(id));
      live[id].computed = 0;
    }
    bool past_decodes = false;
    for (const PlanItem& it : plan.items) {
      ASSERT_TRUE(seen.insert(it.seq_id).second) << "seq " << it.seq_id << " twice";
      ASSERT_TRUE(live.count(it.seq_id));
      Model& m = live[it.seq_id];
      ASSERT_FALSE(m.awaiting);
      ASSERT_EQ(it.start_pos, m.computed);
      ASSERT_GE(it.num_tokens, 1);
      const int64_t end = it.start_pos + it.num_tokens;
      ASSERT_LE(end, m.known());
      ASSERT_EQ(it.needs_sample, end == m.known());
      ASSERT_GE(kv.reserved_tokens(it.seq_id), end);
      const bool decode = it.start_pos > 0 && it.num_tokens == 1 && it.needs_sample;
      ASSERT_FALSE(decode && past_decodes) << "decode after a prefill";
      past_decodes = past_decodes || !decode;
      m.computed = end;
      m.awaiting = it.needs_sample;
    }
    // Every page in use belongs to exactly one live seq.
    std::set<int32_t> pages;
    int64_t held = 0;
    for (const auto& [id, m] : live) {
      for (const auto* list : {kv.block_table(id), kv.state_pages(id)}) {
        if (!list) continue;
        held += static_cast<int64_t>(list->size());
        for (int32_t p : *list) {
          ASSERT_TRUE(pages.insert(p).second);
          ASSERT_EQ(kv.pool().refcount(p), 1);
        }
      }
    }
    ASSERT_EQ(held, kv.num_total_pages() - kv.num_free_pages());

    for (const PlanItem& it : plan.items) {
      if (!it.needs_sample) continue;
      Model& m = live[it.seq_id];
      m.awaiting = false;
      if (chance(0.005)) {
        s.finish(it.seq_id);  // stop token
        live.erase(it.seq_id);
        ++stopped;
        continue;
      }
      ++m.generated;
      const bool done = s.on_token_appended(it.seq_id);
      ASSERT_EQ(done, m.generated == m.max_new);
      ASSERT_EQ(s.num_generated(it.seq_id), done ? -1 : m.generated);
      if (done) {
        live.erase(it.seq_id);
        ++completed;
      }
    }
    if (!live.empty() && chance(0.01)) {
      auto it = live.begin();
      std::advance(it, uniform(0, static_cast<int64_t>(live.size()) - 1));
      s.cancel(it->first);
      live.erase(it);
      ++cancelled;
    }
  }
  EXPECT_LT(steps, 100'000) << "no progress";
  EXPECT_TRUE(live.empty());
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(kv.num_free_pages(), num_pages);
  EXPECT_EQ(completed + cancelled + stopped + rejected, static_cast<int64_t>(num_requests));
  EXPECT_GE(completed, 30) << rejected << " rejected, " << cancelled << " cancelled, " << stopped
                           << " stopped";
  RecordProperty("preemptions", static_cast<int>(s.num_preemptions()));
  if (GetParam() % 2) {
    EXPECT_GT(s.num_preemptions(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, SchedulerSim, ::testing::Range(0, 40));

}  // namespace
}  // namespace deepinfer::sched

// Test helpers: a KvManager of a chosen shape and a fake engine that runs plans.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <vector>

#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/sched/scheduler.h"

namespace deepinfer::sched::testing {

// A pool of num_pages pages of page_tokens tokens; each seq's constant state is constant_pages.
inline kv::KvManager make_kv(int page_tokens, int64_t constant_pages, int64_t num_pages) {
  kv::PageSpec spec;
  spec.page_tokens = page_tokens;
  spec.page_bytes = 1000;
  spec.constant_pages_per_seq = constant_pages;
  spec.num_pages = num_pages;
  auto m = kv::KvManager::create(spec);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return std::move(m).value();
}

inline SchedulerConfig make_config(int64_t budget, int max_seqs, int64_t max_model_len,
                                   SchedPolicy policy = SchedPolicy::kFcfs) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.max_model_len = max_model_len;
  c.policy = policy;
  return c;
}

inline SchedRequest req(uint64_t id, int64_t prompt, int64_t max_new, int priority = 0,
                        uint64_t arrival = 0) {
  SchedRequest r;
  r.seq_id = id;
  r.prompt_len = prompt;
  r.max_new_tokens = max_new;
  r.priority = priority;
  r.arrival = arrival;
  return r;
}

// Runs one plan as the engine would: every needs_sample item yields a token.
inline StepPlan step(Scheduler& s) {
  StepPlan plan = s.schedule();
  for (const PlanItem& it : plan.items)
    if (it.needs_sample) s.on_token_appended(it.seq_id);
  return plan;
}

}  // namespace deepinfer::sched::testing

namespace deepinfer::sched {

// Found by gtest through ADL, so it lives in PlanItem's namespace.
inline void PrintTo(const PlanItem& p, std::ostream* os) {
  *os << "{seq " << p.seq_id << " @" << p.start_pos << " +" << p.num_tokens
      << (p.needs_sample ? " sample}" : "}");
}

}  // namespace deepinfer::sched

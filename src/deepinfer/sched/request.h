// What the scheduler knows about a request, and the plain-data plan it hands the runtime.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "deepinfer/kv/page_spec.h"
#include "deepinfer/kv/unit_key.h"

namespace deepinfer::sched {

enum class SchedPolicy {
  kFcfs,      // by arrival
  kPriority,  // lower value first (vLLM semantics), ties by arrival
};

struct SchedRequest {
  uint64_t seq_id = 0;
  int64_t prompt_len = 0;      // >= 1
  int64_t max_new_tokens = 0;  // >= 1; the scheduler finishes the seq when it is reached
  int priority = 0;
  uint64_t arrival = 0;  // ordering key; equal arrivals keep the order of add()
  // Prefix cache: the chain keys of the prompt's whole blocks (kv/unit_key.h). When the sequence
  // starts (again, after a preemption too) it attaches the longest cached prefix of at most
  // known - 1 tokens (KvManager::attach_prefix), evaluating expiry at cache_now_s and extending
  // the units it uses to cache_extend_to_s. Null: no lookup.
  std::shared_ptr<const std::vector<kv::UnitKey>> prefix_keys;
  int64_t cache_now_s = 0, cache_extend_to_s = 0;
  // Sorted positions a chunk of chunked prefill must end at (never crossed): the persistence
  // points where the engine snapshots the sequence's state, for a runner that cannot snapshot
  // inside a row (docs/decisions/0020); empty otherwise.
  std::vector<int64_t> chunk_ends;
};

struct PlanItem {
  uint64_t seq_id = 0;
  int64_t start_pos = 0;   // first position this item feeds
  int64_t num_tokens = 0;  // 1 for a decode step
  // This chunk ends the known tokens (last prompt chunk, last re-prefill chunk, or a decode):
  // sample at its last position and report it with on_token_appended (or finish).
  bool needs_sample = false;
  // Tokens this sequence took from the prefix cache when it started in this plan (start_pos then
  // equals it); 0 otherwise.
  int64_t cached_tokens = 0;
  // Speculative decoding: the item is a decode of 1 + num_draft tokens, the sampled token then
  // the drafts set through Scheduler::set_draft; the engine verifies them in order
  // (on_draft_accepted per accepted draft, then on_token_appended) and rolls the rest back.
  int64_t num_draft = 0;
  bool operator==(const PlanItem&) const = default;
};

struct StepPlan {
  std::vector<PlanItem> items;  // at most one per seq, sum of num_tokens <= the token budget
  // Lost all KV this step (pages freed): the engine resets their model state. They come back as
  // prefills from position 0 over prompt + generated tokens, and are not in `items`.
  std::vector<uint64_t> preempted;
  // Snapshot pages into the constant pages of sequences that started from the prefix cache in
  // this plan: done before any row runs.
  std::vector<kv::PageCopy> page_copies;
  int64_t num_tokens() const {
    int64_t n = 0;
    for (const PlanItem& it : items) n += it.num_tokens;
    return n;
  }
};

}  // namespace deepinfer::sched

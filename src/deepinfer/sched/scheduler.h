// Continuous batching with chunked prefill and recompute preemption over a KvManager.
//
// Protocol per step: schedule() -> the engine runs every item -> for each item with needs_sample
// it reports the sampled token (on_token_appended) or a stop (finish). A seq with an unreported
// sample is not scheduled again until it is reported. Positions advance when schedule() emits an
// item, so the engine must run every item of a plan it received.
#pragma once

#include <cstdint>
#include <set>
#include <unordered_map>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/sched/request.h"

namespace deepinfer::sched {

struct SchedulerConfig {
  int64_t max_num_batched_tokens = 2048;  // tokens per step over all items
  int max_num_seqs = 64;                  // sequences holding KV at once
  int64_t max_model_len = 0;              // prompt + new tokens, per sequence
  SchedPolicy policy = SchedPolicy::kFcfs;
  // Off: a prefill runs in one step, so prompt + max_new_tokens - 1 must fit the token budget.
  bool enable_chunked_prefill = true;
};

class Scheduler {
 public:
  // Errors name the field (e.g. max_num_batched_tokens must be >= max_num_seqs so every running
  // sequence can decode each step). The engine validates before constructing.
  static Status validate(const SchedulerConfig& cfg);

  Scheduler(SchedulerConfig cfg, kv::KvManager* kv);

  // invalid_argument naming the field for a request that can never run: bad lengths,
  // prompt_len + max_new_tokens > max_model_len, more pages than the whole pool, or a duplicate
  // seq_id.
  Status add(const SchedRequest& r);
  // n > 1 sampling: starts `child` as a copy of `parent` just past the parent's prompt, sharing
  // its KV pages (kv::KvManager::fork; *copies, appended to, must run before the next step's
  // rows). Call it after the step that ran the parent's last prompt chunk, before reporting the
  // parent's sample. Needs the parent running with num_computed == child.prompt_len, a free slot
  // (max_num_seqs) and pool pages for the child's fresh pages. The child then runs with its
  // prompt computed and a sample owed, as if its own last prompt chunk had just been emitted
  // with needs_sample: the engine samples its first token from the parent's logits and reports
  // on_token_appended(child) (or finish/cancel). false, with nothing changed, when it can't
  // share: the caller then add()s the child, which recomputes its prompt. Errors are add()'s,
  // for a child that could never run.
  StatusOr<bool> fork(uint64_t parent, const SchedRequest& child,
                      std::vector<kv::PageCopy>* copies);
  // Prefill/decode disaggregation: starts r running with its whole prompt computed elsewhere and
  // its first sample owed, as fork()'s child is. The caller writes the prompt's state into the
  // seq's pages (KvManager::state_pages, then block_table) before its next step and reports the
  // sample (on_token_appended or finish). false, with nothing changed, when no slot (max_num_seqs)
  // or pool pages are free now. Errors are add()'s, for a request that could never run.
  StatusOr<bool> add_prefilled(const SchedRequest& r);
  // Any time: frees every page and forgets the seq. No-op for an unknown seq.
  void cancel(uint64_t seq_id);

  // Decodes of running seqs first, then partial prefills and waiting seqs in policy order, under
  // the token budget. When a running seq can't grow, the lowest-priority (latest-arrival) running
  // seq is preempted, possibly itself.
  StepPlan schedule();

  // The seq's known length grows by one. Returns true when that reached max_new_tokens: the
  // scheduler then finished it (pages freed). No-op (false) for an unknown seq (e.g. cancelled
  // while its step ran).
  bool on_token_appended(uint64_t seq_id);
  // Speculative decoding. set_draft: the seq wants `num_draft` drafts verified in its next
  // decode (cleared by the next schedule()); the scheduler emits 1 + k tokens, k <= num_draft,
  // capped by the token budget, max_new_tokens and the pool (it falls back to a plain decode
  // rather than preempting for drafts). on_draft_accepted: the target's token at the next
  // position equals that position's draft, so the known length and the computed state both
  // grow by one; call it per accepted draft, in order, before on_token_appended for the token
  // that follows them. Returns true, as on_token_appended, when max_new_tokens was reached.
  void set_draft(uint64_t seq_id, int64_t num_draft);
  bool on_draft_accepted(uint64_t seq_id);
  // Stop condition hit: frees pages. No-op for an unknown seq.
  void finish(uint64_t seq_id);

  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  bool has_work() const { return !seqs_.empty(); }

  // Introspection for the engine's metrics and for tests.
  int64_t num_generated(uint64_t seq_id) const;  // -1 for an unknown seq
  int64_t num_computed(uint64_t seq_id) const;   // -1 for an unknown seq
  int64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerConfig& config() const { return cfg_; }

 private:
  // Policy order: smaller is scheduled first and preempted last.
  struct Key {
    int64_t priority;
    uint64_t arrival;
    uint64_t order;
    uint64_t seq_id;
    auto operator<=>(const Key&) const = default;
  };
  struct Seq {
    SchedRequest req;
    Key key;
    int64_t num_generated = 0;
    int64_t num_computed = 0;     // positions whose state is built
    bool running = false;         // holds KV pages
    bool awaiting = false;        // emitted needs_sample, not yet reported
    uint64_t scheduled_step = 0;  // step_ of its item in the plan being built
    uint64_t preempted_step = 0;
    int64_t num_draft = 0;  // set_draft's, for the next schedule()
    int64_t known() const { return req.prompt_len + num_generated; }
  };

  // add()'s checks: invalid_argument naming the field for a request that can never run.
  Status check_request(const SchedRequest& r) const;
  Key make_key(const SchedRequest& r);
  // fork and add_prefilled: r runs (its pages held) with its prompt computed, a sample owed.
  void start_with_prompt_computed(const SchedRequest& r);
  void remove(uint64_t seq_id);
  // Preempts the lowest-key running seq; returns its id. Drops its item from `plan` if it has one.
  uint64_t preempt_lowest(StepPlan& plan, int64_t& budget);
  // At most `want` tokens from position `from`, not crossing s's next chunk end.
  int64_t cap_at_chunk_end(const Seq& s, int64_t want, int64_t from) const;
  void emit(Seq& s, int64_t num_tokens, StepPlan& plan, int64_t& budget);

  SchedulerConfig cfg_;
  kv::KvManager* kv_;
  std::unordered_map<uint64_t, Seq> seqs_;
  std::vector<uint64_t> running_;  // sorted by key at the start of each schedule()
  std::set<Key> waiting_;
  uint64_t next_order_ = 0;
  uint64_t step_ = 0;
  int64_t num_preemptions_ = 0;
  std::vector<uint64_t> scratch_;  // reused across steps
  std::vector<Key> keys_;
  // Attach copies of sequences started from the cache in the plan being built; those still in
  // the plan at its end go into StepPlan::page_copies.
  std::vector<std::pair<uint64_t, std::vector<kv::PageCopy>>> attach_copies_;
};

}  // namespace deepinfer::sched

#include "deepinfer/sched/scheduler.h"

#include <algorithm>
#include <string>
#include <utility>

#include "deepinfer/base/check.h"

namespace deepinfer::sched {

Status Scheduler::validate(const SchedulerConfig& cfg) {
  if (cfg.max_num_batched_tokens < 1)
    return invalid_argument("max_num_batched_tokens must be >= 1, got " +
                            std::to_string(cfg.max_num_batched_tokens));
  if (cfg.max_num_seqs < 1)
    return invalid_argument("max_num_seqs must be >= 1, got " + std::to_string(cfg.max_num_seqs));
  if (cfg.max_model_len < 1)
    return invalid_argument("max_model_len must be >= 1, got " + std::to_string(cfg.max_model_len));
  // Otherwise running sequences past the budget would never get a decode step.
  if (cfg.max_num_batched_tokens < cfg.max_num_seqs)
    return invalid_argument("max_num_batched_tokens (" +
                            std::to_string(cfg.max_num_batched_tokens) +
                            ") must be >= max_num_seqs (" + std::to_string(cfg.max_num_seqs) + ")");
  return ok_status();
}

Scheduler::Scheduler(SchedulerConfig cfg, kv::KvManager* kv) : cfg_(cfg), kv_(kv) {
  DI_CHECK(kv_ != nullptr);
  running_.reserve(static_cast<size_t>(std::max(cfg_.max_num_seqs, 1)));
}

Status Scheduler::check_request(const SchedRequest& r) const {
  const std::string id = "request " + std::to_string(r.seq_id) + ": ";
  if (seqs_.count(r.seq_id)) return invalid_argument(id + "seq_id is already scheduled");
  if (r.prompt_len < 1)
    return invalid_argument(id + "prompt_len must be >= 1, got " + std::to_string(r.prompt_len));
  if (r.max_new_tokens < 1)
    return invalid_argument(id + "max_new_tokens must be >= 1, got " +
                            std::to_string(r.max_new_tokens));
  if (r.prompt_len > cfg_.max_model_len || r.max_new_tokens > cfg_.max_model_len - r.prompt_len)
    return invalid_argument(id + "prompt_len (" + std::to_string(r.prompt_len) +
                            ") + max_new_tokens (" + std::to_string(r.max_new_tokens) +
                            ") exceeds max_model_len (" + std::to_string(cfg_.max_model_len) + ")");
  // The last sampled token is never fed back, so the state holds at most this many tokens; a
  // preempted seq re-prefills up to this many in one go when chunking is off.
  const int64_t max_state_tokens = r.prompt_len + r.max_new_tokens - 1;
  if (!cfg_.enable_chunked_prefill && max_state_tokens > cfg_.max_num_batched_tokens)
    return invalid_argument(
        id + "prompt_len + max_new_tokens - 1 (" + std::to_string(max_state_tokens) +
        ") exceeds max_num_batched_tokens (" + std::to_string(cfg_.max_num_batched_tokens) +
        ") with chunked prefill off");
  const int64_t pages = kv_->pages_needed(0, max_state_tokens, /*new_seq=*/true);
  if (pages > kv_->num_total_pages())
    return invalid_argument(id + "prompt_len + max_new_tokens needs " + std::to_string(pages) +
                            " KV pages but the pool holds " +
                            std::to_string(kv_->num_total_pages()) +
                            " (lower max_new_tokens or raise --kv-memory)");
  return ok_status();
}

Scheduler::Key Scheduler::make_key(const SchedRequest& r) {
  return Key{cfg_.policy == SchedPolicy::kPriority ? r.priority : 0, r.arrival, next_order_++,
             r.seq_id};
}

Status Scheduler::add(const SchedRequest& r) {
  RETURN_IF_ERROR(check_request(r));
  Seq s;
  s.req = r;
  s.key = make_key(r);
  waiting_.insert(s.key);
  seqs_.emplace(r.seq_id, s);
  return ok_status();
}

StatusOr<bool> Scheduler::fork(uint64_t parent, const SchedRequest& child,
                               std::vector<kv::PageCopy>* copies) {
  RETURN_IF_ERROR(check_request(child));
  auto it = seqs_.find(parent);
  // An unknown parent was cancelled or finished while its step ran.
  if (it == seqs_.end() || !it->second.running || it->second.num_computed != child.prompt_len ||
      num_running() >= cfg_.max_num_seqs)
    return false;
  if (!kv_->fork(parent, child.seq_id, child.prompt_len, copies)) return false;
  start_with_prompt_computed(child);
  return true;
}

void Scheduler::start_with_prompt_computed(const SchedRequest& r) {
  Seq s;
  s.req = r;
  s.key = make_key(r);
  s.num_computed = r.prompt_len;
  s.running = true;
  s.awaiting = true;
  running_.push_back(r.seq_id);
  seqs_.emplace(r.seq_id, s);
}

StatusOr<bool> Scheduler::add_prefilled(const SchedRequest& r) {
  RETURN_IF_ERROR(check_request(r));
  if (num_running() >= cfg_.max_num_seqs || !kv_->reserve(r.seq_id, r.prompt_len)) return false;
  start_with_prompt_computed(r);
  return true;
}

void Scheduler::remove(uint64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  kv_->free(seq_id);
  if (it->second.running) {
    running_.erase(std::find(running_.begin(), running_.end(), seq_id));
  } else {
    waiting_.erase(it->second.key);
  }
  seqs_.erase(it);
}

void Scheduler::cancel(uint64_t seq_id) { remove(seq_id); }
void Scheduler::finish(uint64_t seq_id) { remove(seq_id); }

bool Scheduler::on_token_appended(uint64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return false;
  Seq& s = it->second;
  DI_CHECK(s.awaiting);  // only items with needs_sample produce tokens
  s.awaiting = false;
  if (++s.num_generated < s.req.max_new_tokens) return false;
  remove(seq_id);
  return true;
}

void Scheduler::set_draft(uint64_t seq_id, int64_t num_draft) {
  if (auto it = seqs_.find(seq_id); it != seqs_.end()) it->second.num_draft = num_draft;
}

bool Scheduler::on_draft_accepted(uint64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return false;
  Seq& s = it->second;
  DI_CHECK(s.awaiting);  // inside the verification of its speculative decode
  ++s.num_computed;
  if (++s.num_generated < s.req.max_new_tokens) return false;
  remove(seq_id);
  return true;
}

int64_t Scheduler::num_generated(uint64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? -1 : it->second.num_generated;
}

int64_t Scheduler::num_computed(uint64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? -1 : it->second.num_computed;
}

void Scheduler::emit(Seq& s, int64_t num_tokens, StepPlan& plan, int64_t& budget) {
  PlanItem item;
  item.seq_id = s.req.seq_id;
  item.start_pos = s.num_computed;
  item.num_tokens = num_tokens;
  item.needs_sample = s.num_computed + num_tokens == s.known();
  s.num_computed += num_tokens;
  s.scheduled_step = step_;
  s.awaiting = item.needs_sample;
  budget -= num_tokens;
  plan.items.push_back(item);
}

uint64_t Scheduler::preempt_lowest(StepPlan& plan, int64_t& budget) {
  DI_CHECK(!running_.empty());
  // Linear: running_ is at most max_num_seqs long and seqs admitted this step sit unsorted at
  // its end.
  auto lowest = running_.begin();
  for (auto it = running_.begin(); it != running_.end(); ++it)
    if (seqs_.at(*it).key > seqs_.at(*lowest).key) lowest = it;
  const uint64_t id = *lowest;
  Seq& v = seqs_.at(id);
  if (v.scheduled_step == step_) {
    auto item = std::find_if(plan.items.begin(), plan.items.end(),
                             [id](const PlanItem& p) { return p.seq_id == id; });
    DI_CHECK(item != plan.items.end());
    budget += item->num_tokens;
    if (item->needs_sample) v.awaiting = false;
    plan.items.erase(item);
    v.scheduled_step = 0;
  }
  kv_->free(id);
  running_.erase(lowest);
  v.running = false;
  v.num_computed = 0;
  v.preempted_step = step_;
  waiting_.insert(v.key);
  plan.preempted.push_back(id);
  ++num_preemptions_;
  return id;
}

StepPlan Scheduler::schedule() {
  ++step_;
  kv_->clear_protected();  // the previous plan's attach copies have run
  StepPlan plan;
  int64_t budget = cfg_.max_num_batched_tokens;
  const int64_t page_tokens = kv_->spec().page_tokens;
  std::sort(running_.begin(), running_.end(),
            [this](uint64_t a, uint64_t b) { return seqs_.at(a).key < seqs_.at(b).key; });

  // Decodes first: they are one token each and hold the most finished work.
  scratch_.assign(running_.begin(), running_.end());
  for (uint64_t id : scratch_) {
    if (budget <= 0) break;
    Seq& s = seqs_.at(id);
    const int64_t want_draft = std::exchange(s.num_draft, 0);
    if (!s.running || s.awaiting || s.known() - s.num_computed != 1) continue;
    // Drafts only where the budget, max_new_tokens and the pool allow them as they are.
    const int64_t k =
        std::min({want_draft, budget - 1, s.req.max_new_tokens - s.num_generated - 1});
    if (k > 0 && kv_->reserve(id, s.num_computed + 1 + k)) {
      emit(s, 1, plan, budget);
      plan.items.back().num_tokens += k;
      plan.items.back().num_draft = k;
      budget -= k;
      continue;
    }
    while (!kv_->reserve(id, s.num_computed + 1)) {
      if (preempt_lowest(plan, budget) == id) break;
    }
    if (s.running) emit(s, 1, plan, budget);
  }

  // Then partial prefills and waiting seqs, merged in policy order.
  keys_.clear();
  for (uint64_t id : running_) {
    const Seq& s = seqs_.at(id);
    if (!s.awaiting && s.scheduled_step != step_ && s.known() - s.num_computed > 1)
      keys_.push_back(s.key);
  }
  for (const Key& k : waiting_) {
    const Seq& s = seqs_.at(k.seq_id);
    if (!s.awaiting && s.preempted_step != step_) keys_.push_back(k);
  }
  std::sort(keys_.begin(), keys_.end());
  // Once one waiting seq can't start, later ones wait too, so a long prompt isn't starved by
  // shorter ones behind it.
  bool admit = true;
  for (const Key& k : keys_) {
    if (budget <= 0) break;
    const uint64_t id = k.seq_id;
    Seq& s = seqs_.at(id);
    if (s.preempted_step == step_) continue;  // preempted earlier in this loop
    const int64_t remaining = s.known() - s.num_computed;
    const int64_t want = cap_at_chunk_end(
        s, cfg_.enable_chunked_prefill ? std::min(remaining, budget) : remaining, s.num_computed);
    if (s.running) {
      if (want > budget) continue;
      // Take what the pool has left rather than preempting; preempt only when nothing fits.
      int64_t got = 0;
      while (true) {
        const int64_t room =
            kv_->reserved_tokens(id) + kv_->num_available_pages() * page_tokens - s.num_computed;
        const int64_t fit = std::min(want, room);
        if (fit == want || (fit > 0 && cfg_.enable_chunked_prefill)) {
          const bool ok = kv_->reserve(id, s.num_computed + fit);
          DI_CHECK(ok);
          got = fit;
          break;
        }
        if (preempt_lowest(plan, budget) == id) break;
      }
      if (got > 0) emit(s, got, plan, budget);
      continue;
    }
    if (!admit) continue;
    if (num_running() >= cfg_.max_num_seqs) {
      admit = false;
      continue;
    }
    int64_t cached = 0;
    std::vector<kv::PageCopy> copies;
    if (s.req.prefix_keys)
      cached = kv_->attach_prefix(id, *s.req.prefix_keys, s.known() - 1, s.req.cache_now_s,
                                  s.req.cache_extend_to_s, &copies);
    const int64_t rest = s.known() - cached;
    const int64_t take =
        cap_at_chunk_end(s, cfg_.enable_chunked_prefill ? std::min(rest, budget) : rest, cached);
    if (take > budget || !kv_->reserve(id, cached + take)) {
      if (cached > 0) kv_->free(id);  // back to the cache, unchanged
      admit = false;
      continue;
    }
    waiting_.erase(s.key);
    s.running = true;
    s.num_computed = cached;
    running_.push_back(id);
    emit(s, take, plan, budget);
    if (cached > 0) {
      plan.items.back().cached_tokens = cached;
      attach_copies_.emplace_back(id, std::move(copies));
    }
  }
  // Copies of sequences preempted later in this plan would land in pages they no longer hold.
  for (auto& [id, copies] : attach_copies_) {
    const Seq& s = seqs_.at(id);
    if (s.running && s.scheduled_step == step_)
      plan.page_copies.insert(plan.page_copies.end(), copies.begin(), copies.end());
  }
  attach_copies_.clear();
  return plan;
}

int64_t Scheduler::cap_at_chunk_end(const Seq& s, int64_t want, int64_t from) const {
  if (!cfg_.enable_chunked_prefill) return want;
  auto end = std::upper_bound(s.req.chunk_ends.begin(), s.req.chunk_ends.end(), from);
  return end == s.req.chunk_ends.end() ? want : std::min(want, *end - from);
}

}  // namespace deepinfer::sched

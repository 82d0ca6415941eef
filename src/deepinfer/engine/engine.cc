// The engine: a step loop on its own thread. Each step asks the scheduler for a plain-data plan,
// runs it as one batch on the model runner (runtime/model_runner.h, CPU or CUDA), and hands the
// sampled rows to the output processor (sampling, grammar, detokenizing, stop rules). Submission
// and cancellation only touch mutex-guarded inboxes.
#include "deepinfer/engine/engine.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "deepinfer/base/check.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/engine/cache_fingerprint.h"
#include "deepinfer/engine/engine_setup.h"
#include "deepinfer/engine/handoff_io.h"
#include "deepinfer/engine/mtp_drafter.h"
#include "deepinfer/engine/output_processor.h"
#include "deepinfer/engine/prefix_cache_stats.h"
#include "deepinfer/engine/prefix_caching.h"
#include "deepinfer/engine/request_state.h"
#include "deepinfer/engine/speculation.h"
#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/recipe/chat_encoder.h"
#include "deepinfer/runtime/model_runner.h"
#include "deepinfer/sched/scheduler.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

using Clock = std::chrono::steady_clock;
constexpr unsigned kMaxSampleThreads = 8;  // a 129k-vocabulary row takes tens of microseconds
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

class EngineImpl final : public Engine {
 public:
  EngineImpl(const EngineArgs& args, std::unique_ptr<runtime::ModelRunner> runner,
             std::unique_ptr<tokenizer::Tokenizer> tok, kv::KvManager kv,
             std::vector<int32_t> scripted, std::optional<PrefixCachingOptions> cache,
             kv::UnitKey cache_root, std::unique_ptr<kv::UnitTiers> tiers, Switches switches,
             std::string fingerprint, std::unique_ptr<Collective> expert_group)
      : args_(args),
        switches_(switches),
        fingerprint_(std::move(fingerprint)),
        expert_group_(std::move(expert_group)),
        runner_(std::move(runner)),
        tok_(std::move(tok)),
        kv_(std::move(kv)),
        sched_(sched_config(args), &kv_),
        outputs_(runner_->info().vocab_size, runner_->info().eos_token_id, std::move(scripted)) {
    if (cache)
      prefix_ = std::make_unique<PrefixCaching>(std::move(*cache), cache_root, runner_.get(), &kv_,
                                                std::move(tiers));
    // A given drafter (tests, bench's oracle) wins over the MTP switch.
    drafter_ = args_.drafter;
    if (!drafter_ && switches_.enable_mtp) drafter_ = std::make_shared<MtpDrafter>(runner_.get());
    free_pages_snapshot_ = kv_.num_available_pages();
    publish_cache_stats();
    thread_ = std::thread([this] { loop(); });
  }

  ~EngineImpl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  Status submit(GenerateRequest r, Callback cb) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!group_down_.empty()) return failed_precondition(group_down_);
    }
    auto rs = std::make_unique<RequestState>();
    ASSIGN_OR_RETURN(rs->prompt, prompt_ids(r));
    RETURN_IF_ERROR(sample::validate(r.params, vocab_size()));
    if (r.params.so_args) {
      ASSIGN_OR_RETURN(rs->grammar_info, grammar_info());
      ASSIGN_OR_RETURN(auto c, grammars_.get(*r.params.so_args, *rs->grammar_info));
      rs->grammar = std::move(c.grammar);
      rs->mask_cache = std::move(c.masks);
    }
    RETURN_IF_ERROR(check_prompt(rs->prompt, r.params.max_tokens, vocab_size(), max_model_len()));
    RETURN_IF_ERROR(check_pool_room(static_cast<int64_t>(rs->prompt.size()),
                                    r.export_state ? 1 : r.params.max_tokens,
                                    kv_.capacity().max_tokens));
    RETURN_IF_ERROR(check_handoff(r, rs->prompt, fingerprint_, kv_.spec(), vocab_size()));
    std::lock_guard<std::mutex> lock(mu_);
    if (r.request_id.empty()) r.request_id = "req-" + std::to_string(next_request_++);
    if (live_ids_.count(r.request_id))
      return invalid_argument("request_id '" + r.request_id + "' is already in use");
    live_ids_.insert(r.request_id);
    rs->retention = request_retention(r);
    rs->req = std::move(r);
    rs->cb = std::move(cb);
    inbox_.push_back(std::move(rs));
    cv_.notify_all();
    return ok_status();
  }

  void cancel(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.push_back(id);
    cv_.notify_all();
  }

  StatusOr<RequestOutput> generate(GenerateRequest r) override {
    std::mutex m;
    std::condition_variable done_cv;
    std::optional<RequestOutput> final_out;
    RETURN_IF_ERROR(submit(std::move(r), [&](const RequestOutput& o) {
      if (!o.finished) return;
      std::lock_guard<std::mutex> lock(m);
      final_out = o;
      done_cv.notify_all();
    }));
    std::unique_lock<std::mutex> lock(m);
    done_cv.wait(lock, [&] { return final_out.has_value(); });
    return *final_out;
  }

  EngineStats stats() const override {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_;
  }
  Status map_ipc_state(SequenceHandoff* h) override { return map_ipc_handoff(*runner_, h); }
  std::vector<std::vector<uint64_t>> expert_counts() const override {
    return runner_->expert_counts();  // atomic counters: no engine-thread lock needed
  }
  PrefixCacheStats prefix_cache_stats() const override {
    PrefixCacheStats c;
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      c = cache_stats_;
    }
    // Read here, not copied each step: the tiers' locks are shared with their disk writer.
    if (prefix_) add_tier_stats(prefix_->tier_stats(), &c);
    return c;
  }
  EngineCapacity capacity() const override {
    EngineCapacity c =
        engine_capacity(kv_.capacity(), kv_.spec(), runner_->info(), max_model_len());
    c.max_num_batched_tokens = args_.max_num_batched_tokens;
    return c;
  }
  int64_t kv_free_pages() const override {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return free_pages_snapshot_;
  }
  int64_t vocab_size() const override { return runner_->info().vocab_size; }
  int32_t eos_token_id() const override { return runner_->info().eos_token_id; }
  recipe::Variant chat_variant() const override {
    return runner_->info().model_type == "deepseek_v41" ? recipe::Variant::kV41
                                                        : recipe::Variant::kV4;
  }
  StatusOr<std::vector<int32_t>> prompt_token_ids(const GenerateRequest& r) const override {
    return prompt_ids(r);
  }
  StatusOr<std::vector<int32_t>> tokenize(const std::string& text) const override {
    if (!tok_) return failed_precondition("model " + args_.model + " has no tokenizer.json");
    return tok_->encode(text);
  }
  StatusOr<std::string> detokenize(const std::vector<int32_t>& ids) const override {
    if (!tok_) return failed_precondition("model " + args_.model + " has no tokenizer.json");
    return tok_->decode(ids);
  }

 private:
  int64_t max_model_len() const { return args_.max_model_len > 0 ? args_.max_model_len : 65536; }

  // The engine thread's prefix cache figures for /metrics, copied under stats_mu_.
  void publish_cache_stats() {
    const PrefixCacheStats c = prefix_
                                   ? device_cache_stats(prefix_->metrics(), kv_.spec().page_bytes)
                                   : PrefixCacheStats();
    std::lock_guard<std::mutex> lock(stats_mu_);
    cache_stats_ = c;
  }

  StatusOr<std::vector<int32_t>> prompt_ids(const GenerateRequest& r) const {
    int given = !r.prompt_ids.empty() + r.prompt.has_value() + r.chat.has_value();
    if (given != 1) return invalid_argument("give exactly one of prompt_ids, prompt, chat");
    if (!r.prompt_ids.empty()) return r.prompt_ids;
    if (!tok_) return failed_precondition("model " + args_.model + " has no tokenizer.json");
    if (r.prompt) return tok_->encode(*r.prompt);
    ASSIGN_OR_RETURN(recipe::SegmentedPrompt pieces,
                     recipe::encode_chat_request_segmented(*r.chat, chat_variant()));
    if (args_.special_tokens_in_content) return tok_->encode(recipe::join_prompt(pieces));
    // Only the recipe's markup may become control tokens; request text is plain text.
    std::vector<tokenizer::TextSpan> spans;
    spans.reserve(pieces.size());
    for (const recipe::PromptPiece& p : pieces) spans.push_back({p.text, p.markup});
    return tok_->encode_spans(spans);
  }

  void admit(std::unique_ptr<RequestState> rs) {
    const int n = std::max(1, rs->req.params.n);
    for (int i = 0; i < n; ++i) {
      auto s = std::make_unique<SeqState>();
      s->seq_id = next_seq_++;
      s->req = rs.get();
      s->index = i;
      s->tokens = rs->prompt;
      const uint64_t fallback = args_.seed * 0x9E3779B97F4A7C15ull + s->seq_id;
      sample::SamplingParams p = sample::child_params(rs->req.params, i);
      s->sampler = std::make_unique<sample::SequenceSampler>(p, fallback, rs->prompt);
      s->stop = std::make_unique<sample::StopChecker>(p, eos_token_id());
      if (rs->grammar)
        s->constraint =
            std::make_unique<SequenceConstraint>(rs->grammar, rs->grammar_info, rs->mask_cache);
      if (tok_)
        s->detok =
            std::make_unique<tokenizer::IncrementalDetokenizer>(*tok_, p.skip_special_tokens);
      s->out.index = i;
      s->parked = i > 0;
      rs->seqs.push_back(std::move(s));
    }
    if (rs->req.import_state) {
      pending_imports_.push_back(rs->seqs[0].get());
    } else {
      start_seq(*rs->seqs[0]);
    }
    if (rs->seqs[0]->finished)  // could not be scheduled at all: neither can its siblings
      for (size_t i = 1; i < rs->seqs.size(); ++i)
        reject(*rs->seqs[i], rs->seqs[0]->out.stop_reason.value_or(""));
    by_id_[rs->req.request_id] = rs.get();
    requests_.push_back(std::move(rs));
  }

  void reject(SeqState& s, const std::string& why) {
    s.finished = true;
    s.parked = false;
    s.out.finish_reason = "abort";
    s.out.stop_reason = why;
    ++s.req->num_finished;
    s.req->touched = true;
  }

  // Hands a sequence to the scheduler: it computes its prompt from position 0, or from the
  // longest prefix the prefix cache holds.
  void start_seq(SeqState& s) {
    s.parked = false;
    sched::SchedRequest r = sched_request(s);
    if (prefix_) {
      s.cache.retention = s.req->retention;
      prefix_->prepare(s.cache, s.tokens, static_cast<int64_t>(s.req->prompt.size()), &r);
    }
    Status st = sched_.add(r);
    if (!st.ok()) {
      reject(s, st.message());
      return;
    }
    seqs_[s.seq_id] = &s;
  }

  sched::SchedRequest sched_request(const SeqState& s) {
    // An export runs the prompt and its first token only.
    sched::SchedRequest r;
    r.seq_id = s.seq_id;
    r.prompt_len = static_cast<int64_t>(s.req->prompt.size());
    r.max_new_tokens = s.req->req.export_state ? 1 : s.req->req.params.max_tokens;
    r.priority = s.req->req.priority;
    r.arrival = arrival_++;
    return r;
  }

  // Imported sequences wait here, in arrival order, until a slot and their pages are free.
  // Returns whether any started (or was refused).
  bool start_pending_imports() {
    const size_t before = pending_imports_.size();
    std::erase_if(pending_imports_, [](const SeqState* s) { return s->finished; });  // cancelled
    while (!pending_imports_.empty()) {
      SeqState& s = *pending_imports_.front();
      StatusOr<bool> started = sched_.add_prefilled(sched_request(s));
      if (started.ok() && !*started && sched_.has_work()) break;  // room comes back later
      pending_imports_.pop_front();
      if (!started.ok() || !*started) {
        reject(s, started.ok() ? "the KV pool cannot hold the imported state"
                               : started.status().message());
        continue;
      }
      start_imported(s);
    }
    return pending_imports_.size() != before;
  }

  // The handoff's pages into the sequence's own, then its first token as if sampled here. The
  // decode side caches nothing of it (it holds no key chain; a preemption recomputes it).
  void start_imported(SeqState& s) {
    RequestState& r = *s.req;
    seqs_[s.seq_id] = &s;
    s.cache.retention = kv::Retention::kNone;
    const SequenceHandoff& h = *r.req.import_state;
    r.cached_tokens = h.cached_tokens;
    Status st = write_handoff_pages(*runner_, kv_, s.seq_id, h);
    StatusOr<TokenChoice> c = st.ok() ? outputs_.replay(s, h) : StatusOr<TokenChoice>(st);
    r.req.import_state.reset();  // the pages are in the pool now
    if (!c.ok()) return fail_request(r, c.status());
    const bool length_reached = sched_.on_token_appended(s.seq_id);
    const std::string reason = outputs_.append(s, *c, length_reached);
    if (!reason.empty()) finish_seq(s, reason);
  }

  // export_state: the sequence's pages after its prompt, before its first token frees them.
  void export_handoff(SeqState& s, const TokenChoice& c) {
    auto h = export_sequence(*runner_, kv_, s.seq_id, fingerprint_, *s.req, c);
    if (!h.ok()) return fail_request(*s.req, h.status());
    s.req->handoff = std::move(*h);
  }

  void finish_seq(SeqState& s, const std::string& reason, bool free_sched = true) {
    if (s.finished) return;
    s.finished = true;
    if (!s.out.finish_reason) s.out.finish_reason = reason;
    if (free_sched) sched_.finish(s.seq_id);
    if (prefix_) prefix_->on_finish(s.cache);
    seqs_.erase(s.seq_id);
    runner_->release(s.seq_id);
    ++s.req->num_finished;
    s.req->touched = true;
  }

  // Ends every unfinished sample of `r` with "abort" (a cancel, or an error while running).
  void abort_samples(RequestState& r) {
    for (auto& s : r.seqs) {
      if (s->finished) continue;
      s->parked = false;
      sched_.cancel(s->seq_id);
      finish_seq(*s, "abort", /*free_sched=*/false);
    }
  }

  // Ends a running request on an error (RequestOutput::status). Rows of the current step that
  // name its samples are skipped (they are no longer in seqs_).
  void fail_request(RequestState& r, Status st) {
    if (r.status.ok()) r.status = std::move(st);
    abort_samples(r);
    r.touched = true;
  }

  void handle_cancel(const std::string& id) {
    auto it = by_id_.find(id);
    if (it != by_id_.end()) abort_samples(*it->second);
  }

  // The plan as the runner's batch: forks' page copies first, then one row per item.
  void build_batch(const sched::StepPlan& plan) {
    batch_.rows.clear();
    batch_.page_copies.clear();
    batch_.rollbacks.clear();  // done right after each verification (roll_back_rejected)
    for (const auto& [child, copy] : pending_copies_)
      if (kv_.contains(child)) batch_.page_copies.push_back(copy);  // not preempted since
    pending_copies_.clear();
    // Sequences started from the prefix cache: their snapshot into their constant pages.
    batch_.page_copies.insert(batch_.page_copies.end(), plan.page_copies.begin(),
                              plan.page_copies.end());
    for (const sched::PlanItem& item : plan.items) {
      SeqState& s = *seqs_.at(item.seq_id);
      // A speculative item's drafts lie past the known tokens (in spec_row).
      DI_CHECK(item.start_pos + item.num_tokens - item.num_draft <=
               static_cast<int64_t>(s.tokens.size()));
      runtime::StepRow row;
      row.seq_id = item.seq_id;
      row.start_pos = item.start_pos;
      row.tokens = &s.tokens[item.start_pos];
      row.num_tokens = item.num_tokens;
      row.state_pages = kv_.state_pages(item.seq_id);
      row.block_table = kv_.block_table(item.seq_id);
      row.wants_logits = item.needs_sample;
      // YOCO compact: only the last keep tokens of what is known need the final hidden state.
      if (switches_.yoco_keep_tokens > 0)
        row.keep_from_pos = std::max<int64_t>(
            0, static_cast<int64_t>(s.tokens.size()) - switches_.yoco_keep_tokens);
      // Sample 0's first item is its start: what it took from the prefix cache is the request's.
      if (s.index == 0 && s.req->cached_tokens < 0) s.req->cached_tokens = item.cached_tokens;
      if (item.cached_tokens > 0) prefix_->on_attached(s.cache, item.cached_tokens);
      row.argmax_only = item.needs_sample && outputs_.argmax_suffices(s);
      if (item.num_draft > 0) {  // the sampled token, then the drafts, with logits at each
        DI_CHECK(static_cast<int64_t>(s.spec_row.size()) >= item.num_tokens &&
                 s.spec_row[0] == s.tokens[item.start_pos]);
        row.tokens = s.spec_row.data();
        row.speculative = true;
        row.argmax_only = false;
      }
      if (prefix_) prefix_->add_row_snapshots(s.cache, &row);
      batch_.rows.push_back(row);
      (item.start_pos >= static_cast<int64_t>(s.req->prompt.size()) ? local_.decode_tokens
                                                                    : local_.prefill_tokens) +=
          item.num_tokens;
    }
  }

  // Runs the plan on the runner; a failure ends every request with a row in it.
  void run_step(const sched::StepPlan& plan) {
    build_batch(plan);
    auto t0 = Clock::now();
    Status st = runner_->execute(batch_, &step_out_);
    local_.forward_s += seconds_since(t0);
    if (!st.ok()) {
      if (prefix_) prefix_->drop_row_snapshots();
      for (const runtime::StepRow& row : batch_.rows)
        if (auto it = seqs_.find(row.seq_id); it != seqs_.end()) fail_request(*it->second->req, st);
      if (in_group()) take_group_down(st);  // the runner took it down: every rank's step failed
      return;
    }
    // 0. Rows that reached a persistence point cache their state (snapshots copied after
    // sampling, before anything can change it).
    // A speculative row's end holds unverified drafts: nothing of it is cached.
    if (prefix_)
      for (const runtime::StepRow& row : batch_.rows) {
        if (row.speculative) continue;
        SeqState& s = *seqs_.at(row.seq_id);
        prefix_->after_row(s.cache, row.seq_id, s.tokens,
                           static_cast<int64_t>(s.req->prompt.size()),
                           row.start_pos + row.num_tokens);
      }
    // 1. Who samples from which logits row (forks of first prompt completions included).
    const int64_t vocab = vocab_size();
    samples_.clear();
    fork_logits_.clear();
    verifications_.clear();
    int64_t k = 0;
    for (const runtime::StepRow& row : batch_.rows) {
      if (row.speculative) {  // num_tokens logits rows, verified in order after the others
        if (auto it = seqs_.find(row.seq_id); it != seqs_.end())
          verifications_.push_back({it->second, step_out_.logits + k * vocab, row.num_tokens - 1});
        k += row.num_tokens;
        continue;
      }
      if (!row.wants_logits) continue;
      float* logits = step_out_.logits + (k++) * vocab;
      auto it = seqs_.find(row.seq_id);
      if (it == seqs_.end()) continue;  // its request failed earlier in this step
      SeqState& s = *it->second;
      if (row.argmax_only) {  // its logits row may be unwritten
        samples_.push_back({&s, nullptr, step_out_.argmax[k - 1], {}, {}});
        continue;
      }
      if (s.index == 0 && s.out.token_ids.empty()) fork_parked_siblings(s, logits);
      samples_.push_back({&s, logits, -1, {}, {}});
    }
    // 2. Masking and sampling: each sample has its own sampler and RNG, so they run in parallel;
    // grammar-constrained ones stay on this thread (their mask caches are engine-thread only).
    auto t1 = Clock::now();
    sample_pool_.parallel_for(static_cast<int64_t>(samples_.size()), 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        if (!samples_[i].seq->constraint) choose(samples_[i]);
    });
    for (PendingSample& p : samples_)
      if (p.seq->constraint) choose(p);
    local_.sample_s += seconds_since(t1);
    // 3. In order: the scheduler, detokenizing and stop rules.
    auto t2 = Clock::now();
    for (PendingSample& p : samples_) {
      SeqState& s = *p.seq;
      if (s.finished) continue;  // a sibling's error ended its request in this loop
      if (!p.status.ok()) {
        fail_request(*s.req, std::move(p.status));
        continue;
      }
      if (s.req->req.export_state) {  // read before the scheduler frees the pages
        export_handoff(s, p.choice);
        if (s.finished) continue;
      }
      const bool length_reached = sched_.on_token_appended(s.seq_id);  // true: max_tokens
      const std::string reason = outputs_.append(s, p.choice, length_reached);
      if (!reason.empty()) finish_seq(s, reason);
    }
    for (const Verification& v : verifications_) verify(v);
    local_.output_s += seconds_since(t2);
    roll_back_rejected();
  }

  // The cuts verification owes the runner, done now rather than before the next row: a drafter
  // that reads the runner's state (MTP) must see each sequence at its accepted length.
  void roll_back_rejected() {
    if (pending_rollbacks_.empty()) return;
    runtime::StepBatch cut;
    cut.group_step = false;
    for (const auto& [id, n] : pending_rollbacks_)
      if (kv_.contains(id))
        cut.rollbacks.push_back({id, n, kv_.state_pages(id), kv_.block_table(id)});
    pending_rollbacks_.clear();
    runtime::StepOutput unused;
    const Status st = runner_->execute(cut, &unused);
    if (st.ok()) return;
    for (const runtime::Rollback& r : cut.rollbacks)
      if (auto it = seqs_.find(r.seq_id); it != seqs_.end()) fail_request(*it->second->req, st);
  }

  struct Verification {
    SeqState* seq = nullptr;
    float* logits = nullptr;  // num_draft + 1 vocab-sized rows
    int64_t num_draft = 0;
  };

  // Samples each position of a speculative row in order, exactly as a plain decode would (the
  // same sampler, penalties, grammar mask and stop rules), and keeps going while the sampled
  // token equals the draft fed at the next position: the tokens are those of a run without
  // drafts. What the rejected drafts computed is rolled back before the sequence's next row.
  void verify(const Verification& v) {
    SeqState& s = *v.seq;
    const int64_t vocab = vocab_size();
    const int64_t start = static_cast<int64_t>(s.tokens.size()) - 1;  // the row's first position
    ++local_.spec_verifications;
    local_.spec_draft_tokens += v.num_draft;
    if (static_cast<int64_t>(local_.spec_accepted_at.size()) < v.num_draft)
      local_.spec_accepted_at.resize(static_cast<size_t>(v.num_draft));
    int64_t accepted = 0;
    for (int64_t i = 0; i <= v.num_draft && !s.finished; ++i) {
      PendingSample p{&s, v.logits + i * vocab, -1, {}, {}};
      choose(p);
      if (!p.status.ok()) {
        fail_request(*s.req, std::move(p.status));
        return;
      }
      const bool is_draft = i < v.num_draft && p.choice.result.token == s.spec_row[size_t(i + 1)];
      const bool length_reached =
          is_draft ? sched_.on_draft_accepted(s.seq_id) : sched_.on_token_appended(s.seq_id);
      const std::string reason = outputs_.append(s, p.choice, length_reached);
      if (is_draft) {
        ++accepted;
        ++s.accepted_drafts;
        ++local_.spec_accepted_tokens;
        ++local_.spec_accepted_at[size_t(i)];
      }
      if (!reason.empty()) finish_seq(s, reason);
      if (!is_draft) break;
    }
    // Positions start .. start + accepted hold verified tokens; the rest of the row goes.
    if (!s.finished && accepted < v.num_draft)
      pending_rollbacks_.emplace_back(s.seq_id, start + 1 + accepted);
  }

  struct PendingSample {
    SeqState* seq = nullptr;
    float* logits = nullptr;  // vocab floats, masked in place; null: take `argmax`
    int32_t argmax = -1;      // the runner's argmax of a row with argmax_only
    TokenChoice choice;
    Status status;  // not ok: the grammar ran out of work (the request ends)
  };

  void choose(PendingSample& p) {
    if (!p.logits) {
      p.choice = outputs_.take_argmax(*p.seq, p.argmax);
      return;
    }
    StatusOr<TokenChoice> c = outputs_.choose(*p.seq, p.logits);
    if (c.ok())
      p.choice = std::move(*c);
    else
      p.status = c.status();
  }

  // Sample 0 just computed the prompt: each waiting sibling becomes a fork of it (the scheduler
  // shares or copies its pages) and samples its first token from a copy of the same logits; one
  // the pool can't fork into computes the prompt itself.
  void fork_parked_siblings(const SeqState& parent, const float* logits) {
    const int64_t vocab = vocab_size();
    for (auto& sib : parent.req->seqs) {
      if (!sib->parked) continue;
      sib->parked = false;
      std::vector<kv::PageCopy> copies;
      StatusOr<bool> forked = sched_.fork(parent.seq_id, sched_request(*sib), &copies);
      if (!forked.ok()) {
        reject(*sib, forked.status().message());
        continue;
      }
      if (!*forked) {
        start_seq(*sib);
        continue;
      }
      seqs_[sib->seq_id] = sib.get();
      for (const kv::PageCopy& c : copies) pending_copies_.emplace_back(sib->seq_id, c);
      fork_logits_.emplace_back(logits, logits + vocab);  // a deque: earlier rows stay put
      samples_.push_back({sib.get(), fork_logits_.back().data(), -1, {}, {}});
    }
  }

  // running_only: only requests that go on (a stream's new tokens); a final output waits for the
  // step's prefix cache write-down, so a client that has it sees the cache's figures too.
  void emit_outputs(bool running_only = false) {
    for (auto it = requests_.begin(); it != requests_.end();) {
      RequestState& r = **it;
      if (!r.touched || (running_only && r.num_finished == static_cast<int>(r.seqs.size()))) {
        ++it;
        continue;
      }
      const RequestOutput o = take_output(r);
      // A client that sees the final output may reuse its id at once (even from the callback).
      if (o.finished) {
        std::lock_guard<std::mutex> lock(mu_);
        live_ids_.erase(r.req.request_id);
      }
      if (r.cb) r.cb(o);
      if (o.finished) {
        by_id_.erase(r.req.request_id);
        it = requests_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void loop() {
    while (true) {
      std::deque<std::unique_ptr<RequestState>> inbox;
      std::vector<std::string> cancels;
      {
        std::unique_lock<std::mutex> lock(mu_);
        auto ready = [&] {
          return stop_ || !inbox_.empty() || !cancels_.empty() || sched_.has_work() ||
                 !pending_imports_.empty();
        };
        // An expert-parallel rank wakes up to step with the others even when it has nothing.
        if (in_group())
          cv_.wait_for(lock, std::chrono::milliseconds(2), ready);
        else
          cv_.wait(lock, ready);
        if (stop_) return;
        inbox.swap(inbox_);
        cancels.swap(cancels_);
      }
      for (auto& r : inbox) admit(std::move(r));
      for (auto& id : cancels) handle_cancel(id);
      // An imported sequence's first token goes out now, not with the next step's token.
      if (start_pending_imports()) emit_outputs();
      bool step = sched_.has_work();
      if (in_group()) {
        // Every rank says whether it has a step to run; all step if any does.
        StatusOr<int64_t> any = runtime::group_max(*expert_group_, step ? 1 : 0);
        if (!any.ok()) {
          take_group_down(any.status());
          emit_outputs();
          continue;
        }
        step = *any > 0;
      }
      if (step) {
        auto t0 = Clock::now();
        local_ = EngineStats();
        if (drafter_) propose_drafts(*drafter_, switches_.nextn_decode, seqs_, sched_);
        sched::StepPlan plan = sched_.schedule();
        local_.schedule_s = seconds_since(t0);
        for (uint64_t id : plan.preempted) {
          runner_->release(id);  // recomputed from position 0 when it runs again
          ++local_.preemptions;
        }
        // A rank in a group steps even with nothing of its own (its part of the others' MoE).
        if (!plan.items.empty() || in_group()) run_step(plan);
        // The plan's attach copies have run: the snapshots they read from are evictable again
        // now, not only once another plan starts (an idle engine would report them in use).
        kv_.clear_protected();
        local_.total_s = seconds_since(t0);
        std::lock_guard<std::mutex> lock(stats_mu_);
        add_step_stats(local_, &stats_);
      }
      if (prefix_) {
        // The step's tokens go out before the write-down of the units it completed (a prompt's
        // units are read back from the device and put in the host tier): a long prompt's first
        // token no longer waits for them.
        emit_outputs(/*running_only=*/true);
        // Snapshots of this step (and of sequences cancelled above) copied, then written down.
        (void)prefix_->end_step();
        prefix_->maybe_sweep();
        publish_cache_stats();
      }
      emit_outputs();
      std::lock_guard<std::mutex> lock(stats_mu_);
      free_pages_snapshot_ = kv_.num_available_pages();
      stats_.num_running = sched_.num_running();
      stats_.num_waiting = sched_.num_waiting();
    }
  }

  EngineArgs args_;
  Switches switches_;        // args_.switches resolved against the environment, once
  std::string fingerprint_;  // of the state (cache_fingerprint): handoffs carry it
  // Expert parallelism: the group (before runner_, which points into it, so it outlives it);
  // null for one rank. group_failed_ (engine thread) / group_down_ (under mu_): why it is down.
  std::unique_ptr<Collective> expert_group_;
  Status group_failed_;
  std::unique_ptr<runtime::ModelRunner> runner_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  kv::KvManager kv_;
  sched::Scheduler sched_;
  OutputProcessor outputs_;

  // Engine-thread only.
  std::vector<std::unique_ptr<RequestState>> requests_;
  std::unordered_map<std::string, RequestState*> by_id_;
  std::unordered_map<uint64_t, SeqState*> seqs_;
  std::deque<SeqState*> pending_imports_;  // import_state sequences not yet started
  uint64_t next_seq_ = 1, arrival_ = 0;
  EngineStats local_;
  runtime::StepBatch batch_;  // reused: steady-state steps allocate nothing here
  runtime::StepOutput step_out_;
  std::vector<PendingSample> samples_;  // this step's, reused
  std::deque<std::vector<float>> fork_logits_;
  ThreadPool sample_pool_{static_cast<int>(
      std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, kMaxSampleThreads))};
  // Forks' page copies, for the next batch (child seq id, copy).
  std::vector<std::pair<uint64_t, kv::PageCopy>> pending_copies_;
  std::unique_ptr<PrefixCaching> prefix_;  // null: --no-prefix-cache

  // Built on the first so_args request (about 30 ms for a 128k vocabulary).
  bool in_group() const { return expert_group_ != nullptr && group_failed_.ok(); }

  // The group is down: every request ends on the error and new ones are refused.
  void take_group_down(const Status& why) {
    group_failed_ = failed_precondition("the expert-parallel group is down: " + why.message());
    expert_group_->abort(why.message());
    {
      std::lock_guard<std::mutex> lock(mu_);
      group_down_ = group_failed_.message();
    }
    for (auto& r : requests_) fail_request(*r, group_failed_);
  }

  StatusOr<std::shared_ptr<const grammar::TokenizerInfo>> grammar_info() {
    std::lock_guard<std::mutex> lock(grammar_mu_);
    if (grammar_info_) return grammar_info_;
    if (!tok_) return failed_precondition("so_args needs the model's tokenizer.json");
    ASSIGN_OR_RETURN(grammar_info_,
                     grammar::TokenizerInfo::from_tokenizer(*tok_, {eos_token_id()}));
    return grammar_info_;
  }
  std::mutex grammar_mu_;
  std::shared_ptr<const grammar::TokenizerInfo> grammar_info_;
  GrammarCache grammars_{
      16, grammar::JsonSchemaOptions{.whitespace = args_.json_flexible_whitespace
                                                       ? grammar::JsonWhitespace::kFlexible
                                                       : grammar::JsonWhitespace::kBounded}};

  // Shared with submitters.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<RequestState>> inbox_;
  std::vector<std::string> cancels_;
  // Speculative decoding (engine thread): the drafter (EngineArgs::drafter, or MTP by the
  // switch; null: off), this step's verifications, and the cuts owed to the runner.
  std::shared_ptr<Drafter> drafter_;
  std::vector<Verification> verifications_;
  std::vector<std::pair<uint64_t, int64_t>> pending_rollbacks_;
  std::set<std::string> live_ids_;
  std::string group_down_;
  uint64_t next_request_ = 0;
  bool stop_ = false;

  mutable std::mutex stats_mu_;
  EngineStats stats_;
  PrefixCacheStats cache_stats_;
  int64_t free_pages_snapshot_ = 0;
  std::thread thread_;
};

}  // namespace

StatusOr<std::unique_ptr<Engine>> Engine::create(const EngineArgs& given) {
  EngineArgs args = given;
  RETURN_IF_ERROR(resolve_step_budget(&args));
  ASSIGN_OR_RETURN(runtime::RunnerOptions ro, runner_options(args));
  ASSIGN_OR_RETURN(const Switches switches, resolve_switches(args.switches));
  ro.batch_invariant = switches.batch_invariant;
  ro.drafting = switches.enable_mtp;  // V4.1 keeps its DSpark windows only when asked
  ASSIGN_OR_RETURN(std::unique_ptr<Collective> expert_group,
                   join_group_if_asked(args, switches, &ro));
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::vector<int32_t> scripted;
  RETURN_IF_ERROR(load_tokenizer(args, &tok, &scripted));
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::ModelRunner> runner, runtime::create_runner(ro));
  fit_to_runner(runner->info(), &args);
  ASSIGN_OR_RETURN(kv::KvManager kv, kv::KvManager::create(runner->page_spec()));
  ASSIGN_OR_RETURN(std::string fp, cache_fingerprint(args.model, runner->info(),
                                                     runner->page_spec(), args.kv_cache_salt));
  std::optional<PrefixCachingOptions> cache;
  kv::UnitKey cache_root;
  std::unique_ptr<kv::UnitTiers> tiers;
  if (args.enable_prefix_cache) {
    ASSIGN_OR_RETURN(cache,
                     prefix_cache_options(args, fp, runner->page_spec().page_tokens, &tiers));
    cache_root = kv::root_key(fp);
  }
  auto e = std::make_unique<EngineImpl>(args, std::move(runner), std::move(tok), std::move(kv),
                                        std::move(scripted), std::move(cache), cache_root,
                                        std::move(tiers), switches, fp, std::move(expert_group));
  return std::unique_ptr<Engine>(std::move(e));
}

}  // namespace deepinfer

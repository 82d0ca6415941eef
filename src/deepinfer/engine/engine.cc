// The engine: a step loop on its own thread. Each step asks the scheduler for a plain-data plan,
// runs it on the CPU reference model sequence by sequence, samples, detokenizes, applies stop
// rules and streams outputs. Submission and cancellation only touch mutex-guarded inboxes.
#include "deepinfer/engine/engine.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "deepinfer/base/check.h"
#include "deepinfer/engine/constrained_decoding.h"
#include "deepinfer/engine/pooled_state_pages.h"
#include "deepinfer/kv/kv_geometry.h"
#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/recipe/chat_encoder.h"
#include "deepinfer/sample/sampler.h"
#include "deepinfer/sample/stop_checker.h"
#include "deepinfer/sched/scheduler.h"
#include "deepinfer/tokenizer/incremental_detokenizer.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct RequestState;

sched::SchedulerConfig sched_config(const EngineArgs& a) {
  sched::SchedulerConfig c;
  c.max_num_batched_tokens = a.max_num_batched_tokens;
  c.max_num_seqs = a.max_num_seqs;
  c.max_model_len = a.max_model_len > 0 ? a.max_model_len : 65536;
  c.policy = a.policy == "priority" ? sched::SchedPolicy::kPriority : sched::SchedPolicy::kFcfs;
  return c;
}

// One of a request's n samples: its own model state, sampler, detokenizer and stop checker.
struct SeqState {
  uint64_t seq_id = 0;
  RequestState* req = nullptr;
  int index = 0;
  std::vector<int32_t> tokens;    // prompt + generated
  int64_t computed = 0;           // tokens already in model_state
  v4::SequenceState model_state;  // in pool pages; empty until its first chunk runs
  std::unique_ptr<sample::SequenceSampler> sampler;
  std::unique_ptr<sample::StopChecker> stop;
  std::unique_ptr<tokenizer::IncrementalDetokenizer> detok;
  std::unique_ptr<SequenceConstraint> constraint;  // so_args
  CompletionOutput out;
  bool finished = false;
  // n > 1: samples 1..n-1 wait ("parked") until sample 0 has computed the prompt, then start
  // from a copy of its state and its last-position logits instead of recomputing the prompt.
  bool parked = false;
  bool forked = false;
  std::vector<float> fork_logits;
  // Sample 0's state after the prompt, copied into this sample's own pages once the scheduler
  // has reserved them (its last prompt chunk).
  std::shared_ptr<const std::string> fork_snapshot;
};

struct RequestState {
  GenerateRequest req;
  Engine::Callback cb;
  std::vector<int32_t> prompt;
  std::vector<std::unique_ptr<SeqState>> seqs;
  int num_finished = 0;
  bool touched = false;
  // so_args, compiled at submit; the mask cache is shared with every request of this so_args.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  std::shared_ptr<const grammar::TokenizerInfo> grammar_info;
  std::shared_ptr<grammar::MaskCache> mask_cache;
  Status status;  // not ok: ended on this error while running (RequestOutput::status)
};

class EngineImpl final : public Engine {
 public:
  EngineImpl(const EngineArgs& args, std::unique_ptr<v4::CpuModel> model,
             std::unique_ptr<tokenizer::Tokenizer> tok, kv::KvManager kv,
             std::shared_ptr<const v4::StateLayout> layout)
      : args_(args),
        model_(std::move(model)),
        tok_(std::move(tok)),
        kv_(std::move(kv)),
        sched_(sched_config(args), &kv_),
        layout_(std::move(layout)),
        // Uninitialized: the OS commits pages as sequences first touch them.
        arena_(new float[static_cast<size_t>(kv_.num_total_pages() * layout_->page_floats())]) {
    free_pages_snapshot_ = kv_.num_free_pages();
    if (!args_.debug_scripted_output.empty() && tok_)
      if (auto ids = tok_->encode(args_.debug_scripted_output); ids.ok()) scripted_ = *ids;
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
    auto rs = std::make_unique<RequestState>();
    ASSIGN_OR_RETURN(rs->prompt, prompt_ids(r));
    RETURN_IF_ERROR(sample::validate(r.params, model_->config().vocab_size));
    if (r.params.so_args) {
      ASSIGN_OR_RETURN(rs->grammar_info, grammar_info());
      ASSIGN_OR_RETURN(auto c, grammars_.get(*r.params.so_args, rs->grammar_info->mask_words()));
      rs->grammar = std::move(c.grammar);
      rs->mask_cache = std::move(c.masks);
    }
    for (int32_t id : rs->prompt)
      if (id < 0 || id >= model_->config().vocab_size)
        return invalid_argument("prompt token id " + std::to_string(id) +
                                " is outside the vocabulary");
    if (rs->prompt.empty()) return invalid_argument("prompt is empty");
    const int64_t need = static_cast<int64_t>(rs->prompt.size()) + r.params.max_tokens;
    if (need > max_model_len())
      return invalid_argument("prompt (" + std::to_string(rs->prompt.size()) +
                              " tokens) + max_tokens (" + std::to_string(r.params.max_tokens) +
                              ") exceeds max_model_len (" + std::to_string(max_model_len()) + ")");
    std::lock_guard<std::mutex> lock(mu_);
    if (r.request_id.empty()) r.request_id = "req-" + std::to_string(next_request_++);
    if (live_ids_.count(r.request_id))
      return invalid_argument("request_id '" + r.request_id + "' is already in use");
    live_ids_.insert(r.request_id);
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
  EngineCapacity capacity() const override {
    auto c = kv_.capacity();
    return {c.max_tokens, c.max_sequences, c.num_pages, layout_->page_bytes()};
  }
  int64_t kv_free_pages() const override {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return free_pages_snapshot_;
  }
  int64_t vocab_size() const override { return model_->config().vocab_size; }
  int32_t eos_token_id() const override {
    return static_cast<int32_t>(model_->config().eos_token_id);
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

  StatusOr<std::vector<int32_t>> prompt_ids(const GenerateRequest& r) const {
    int given = !r.prompt_ids.empty() + r.prompt.has_value() + r.chat.has_value();
    if (given != 1) return invalid_argument("give exactly one of prompt_ids, prompt, chat");
    if (!r.prompt_ids.empty()) return r.prompt_ids;
    if (!tok_) return failed_precondition("model " + args_.model + " has no tokenizer.json");
    if (r.prompt) return tok_->encode(*r.prompt);
    ASSIGN_OR_RETURN(recipe::SegmentedPrompt pieces,
                     recipe::encode_chat_request_segmented(*r.chat));
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
    start_seq(*rs->seqs[0]);
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

  // Hands a sequence to the scheduler (its model state already set up, fresh or forked).
  void start_seq(SeqState& s) {
    s.parked = false;
    sched::SchedRequest sr{s.seq_id, static_cast<int64_t>(s.req->prompt.size()),
                           s.req->req.params.max_tokens, s.req->req.priority, arrival_++};
    Status st = sched_.add(sr);
    if (!st.ok()) {
      reject(s, st.message());
      return;
    }
    seqs_[s.seq_id] = &s;
  }

  // Sample 0 has the whole prompt in its state and `logits_` holds the last position's logits.
  void fork_parked_siblings(const SeqState& parent) {
    std::shared_ptr<const std::string> snapshot;
    for (auto& sib : parent.req->seqs) {
      if (!sib->parked) continue;
      if (!snapshot) snapshot = std::make_shared<const std::string>(parent.model_state.serialize());
      sib->fork_snapshot = snapshot;
      sib->fork_logits = logits_;
      sib->forked = true;
      start_seq(*sib);
    }
  }

  void finish_seq(SeqState& s, const std::string& reason, bool free_sched = true) {
    if (s.finished) return;
    s.finished = true;
    if (!s.out.finish_reason) s.out.finish_reason = reason;
    if (free_sched) sched_.finish(s.seq_id);
    seqs_.erase(s.seq_id);
    s.model_state = v4::SequenceState();  // release memory now
    ++s.req->num_finished;
    s.req->touched = true;
  }

  // Preempted (recompute): the state is rebuilt from scratch, a forked one included.
  void reset_state(SeqState& s) {
    s.model_state = v4::SequenceState();  // its pages are already back in the pool
    s.computed = 0;
    s.forked = false;
    s.fork_logits.clear();
    s.fork_snapshot.reset();
  }

  std::unique_ptr<v4::StatePages> pooled_pages(uint64_t seq_id) {
    return std::make_unique<PooledStatePages>(kv_, seq_id, arena_.get(), layout_->page_floats());
  }

  // Ends every unfinished sample of `r` with "abort" (a cancel, or an error while running).
  void abort_samples(RequestState& r, std::set<uint64_t>* ended = nullptr) {
    for (auto& s : r.seqs) {
      if (s->finished) continue;
      s->parked = false;
      sched_.cancel(s->seq_id);
      finish_seq(*s, "abort", /*free_sched=*/false);
      if (ended) ended->insert(s->seq_id);
    }
  }

  // Ends a running request on an error (RequestOutput::status). Items of the current step's
  // plan may still name its samples: run_item skips them.
  void fail_request(RequestState& r, Status st) {
    if (r.status.ok()) r.status = std::move(st);
    abort_samples(r, &failed_seqs_);
    r.touched = true;
  }

  void handle_cancel(const std::string& id) {
    auto it = by_id_.find(id);
    if (it != by_id_.end()) abort_samples(*it->second);
  }

  void run_item(const sched::PlanItem& item) {
    auto it = seqs_.find(item.seq_id);
    if (it == seqs_.end() && failed_seqs_.count(item.seq_id)) return;  // see fail_request
    DI_CHECK(it != seqs_.end());
    SeqState& s = *it->second;
    if (item.start_pos == 0 && s.computed != 0) reset_state(s);
    DI_CHECK(item.start_pos == s.computed);
    DI_CHECK(item.start_pos + item.num_tokens <= static_cast<int64_t>(s.tokens.size()));
    auto t0 = Clock::now();
    const int64_t prompt_len = static_cast<int64_t>(s.req->prompt.size());
    if (s.forked && item.start_pos + item.num_tokens <= prompt_len) {
      // The prompt is already in the forked state; the plan's prefill chunks only account for it.
      if (item.start_pos + item.num_tokens == prompt_len) {
        auto st = v4::SequenceState::deserialize(*s.fork_snapshot, model_->config(), layout_,
                                                 pooled_pages(s.seq_id));
        DI_CHECK(st.ok());  // our own snapshot of the same model
        s.model_state = std::move(*st);
        s.fork_snapshot.reset();
      }
      if (item.needs_sample) logits_ = s.fork_logits;
    } else {
      if (s.model_state.empty())
        s.model_state = v4::make_sequence_state(model_->config(), layout_, pooled_pages(s.seq_id));
      Status st = model_->forward(s.model_state, &s.tokens[item.start_pos], item.num_tokens, false,
                                  &logits_);
      DI_CHECK(st.ok());  // inputs were validated at submit
      (item.start_pos >= prompt_len ? local_.decode_tokens : local_.prefill_tokens) +=
          item.num_tokens;
    }
    s.computed += item.num_tokens;
    local_.forward_s += seconds_since(t0);
    if (item.needs_sample && s.index == 0 && s.out.token_ids.empty()) fork_parked_siblings(s);
    if (!item.needs_sample) return;
    auto t1 = Clock::now();
    const bool constrained = s.constraint && args_.debug_scripted_output.empty();
    if (constrained) {
      // A grammar over its work budget ends its own request; the step goes on for the others.
      Status st = s.constraint->apply(logits_.data(), vocab_size());
      if (!st.ok()) {
        fail_request(*s.req, std::move(st));
        return;
      }
    }
    sample::SampleResult r = s.sampler->sample(logits_.data(), vocab_size(), eos_token_id());
    if (!args_.debug_scripted_output.empty()) {
      const size_t i = s.out.token_ids.size();
      r.token = i < scripted_.size() ? scripted_[i] : eos_token_id();
    }
    // Only eos is left when the grammar is complete; if min_tokens masked it, end here anyway.
    bool grammar_stop = false, grammar_dead = false;
    if (constrained && !s.constraint->accept(r.token)) {
      if (s.constraint->budget_exceeded()) {
        fail_request(*s.req, s.constraint->budget_error());
        return;
      }
      grammar_dead = !s.constraint->can_terminate();
      r.token = eos_token_id();
      if (!grammar_dead) s.constraint->accept(r.token);
    }
    if (constrained) grammar_stop = s.constraint->is_terminated() && r.token == eos_token_id();
    s.sampler->accept(r.token);
    s.tokens.push_back(r.token);
    const bool sched_done = sched_.on_token_appended(s.seq_id);  // true: max_tokens reached
    local_.sample_s += seconds_since(t1);
    auto t2 = Clock::now();
    std::string delta;
    if (s.detok) (void)s.detok->push(r.token, &delta);
    bool done = false;
    std::string reason;
    std::string emit = s.stop->push(r.token, delta, &done, &reason);
    if (sched_done && !done) {
      done = true;
      reason = "length";
    }
    if ((grammar_stop || grammar_dead) && !done) {  // ignore_eos cannot outlive the grammar
      done = true;
      reason = grammar_dead ? "abort" : "stop";
      if (grammar_dead) s.out.stop_reason = "so_args: the grammar allows no token here";
    }
    s.out.token_ids.push_back(r.token);
    s.out.delta_token_ids.push_back(r.token);
    if (s.req->req.params.logprobs) {
      TokenLogprobs lp{r.token, r.logprob, {}};
      for (const auto& t : r.top) lp.top.emplace_back(t.id, t.logprob);
      s.out.logprobs.push_back(std::move(lp));
    }
    if (done) {
      emit += s.stop->flush();
      // Bytes of a character cut off by max_tokens come out as U+FFFD, never silently dropped.
      if (s.detok && reason == "length") s.detok->finish(&emit);
      if (auto m = s.stop->matched_stop()) s.out.stop_reason = *m;
    }
    s.out.text += emit;
    s.out.delta_text += emit;
    s.req->touched = true;
    if (done) finish_seq(s, reason);
    local_.output_s += seconds_since(t2);
  }

  void emit_outputs() {
    failed_seqs_.clear();  // the step is over: no plan item names them any more
    for (auto it = requests_.begin(); it != requests_.end();) {
      RequestState& r = **it;
      if (!r.touched) {
        ++it;
        continue;
      }
      RequestOutput o;
      o.request_id = r.req.request_id;
      o.prompt_token_ids = r.prompt;
      o.finished = r.num_finished == static_cast<int>(r.seqs.size());
      o.status = r.status;
      o.usage.prompt_tokens = static_cast<int64_t>(r.prompt.size());
      for (auto& s : r.seqs) {
        o.outputs.push_back(s->out);
        o.usage.completion_tokens += static_cast<int64_t>(s->out.token_ids.size());
        s->out.delta_text.clear();
        s->out.delta_token_ids.clear();
      }
      r.touched = false;
      if (r.cb) r.cb(o);
      if (o.finished) {
        by_id_.erase(r.req.request_id);
        {
          std::lock_guard<std::mutex> lock(mu_);
          live_ids_.erase(r.req.request_id);
        }
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
        cv_.wait(lock, [&] {
          return stop_ || !inbox_.empty() || !cancels_.empty() || sched_.has_work();
        });
        if (stop_) return;
        inbox.swap(inbox_);
        cancels.swap(cancels_);
      }
      for (auto& r : inbox) admit(std::move(r));
      for (auto& id : cancels) handle_cancel(id);
      if (sched_.has_work()) {
        auto t0 = Clock::now();
        local_ = EngineStats();
        sched::StepPlan plan = sched_.schedule();
        local_.schedule_s = seconds_since(t0);
        for (uint64_t id : plan.preempted) {
          auto it = seqs_.find(id);
          if (it == seqs_.end()) continue;
          reset_state(*it->second);
          ++local_.preemptions;
        }
        for (const auto& item : plan.items) run_item(item);
        local_.total_s = seconds_since(t0);
        std::lock_guard<std::mutex> lock(stats_mu_);
        stats_.steps += 1;
        stats_.schedule_s += local_.schedule_s;
        stats_.forward_s += local_.forward_s;
        stats_.sample_s += local_.sample_s;
        stats_.output_s += local_.output_s;
        stats_.total_s += local_.total_s;
        stats_.prefill_tokens += local_.prefill_tokens;
        stats_.decode_tokens += local_.decode_tokens;
        stats_.preemptions += local_.preemptions;
      }
      emit_outputs();
      std::lock_guard<std::mutex> lock(stats_mu_);
      free_pages_snapshot_ = kv_.num_free_pages();
      stats_.num_running = sched_.num_running();
      stats_.num_waiting = sched_.num_waiting();
    }
  }

  EngineArgs args_;
  std::unique_ptr<v4::CpuModel> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  kv::KvManager kv_;
  sched::Scheduler sched_;
  std::shared_ptr<const v4::StateLayout> layout_;
  std::unique_ptr<float[]> arena_;  // every pool page, layout_->page_floats() each

  // Engine-thread only.
  std::vector<std::unique_ptr<RequestState>> requests_;
  std::unordered_map<std::string, RequestState*> by_id_;
  std::unordered_map<uint64_t, SeqState*> seqs_;
  uint64_t next_seq_ = 1, arrival_ = 0;
  std::vector<float> logits_;
  EngineStats local_;
  std::vector<int32_t> scripted_;   // debug_scripted_output's tokens
  std::set<uint64_t> failed_seqs_;  // ended by fail_request during the current step

  // Built on the first so_args request (about 30 ms for a 128k vocabulary).
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
  GrammarCache grammars_{16};

  // Shared with submitters.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<RequestState>> inbox_;
  std::vector<std::string> cancels_;
  std::set<std::string> live_ids_;
  uint64_t next_request_ = 0;
  bool stop_ = false;

  mutable std::mutex stats_mu_;
  EngineStats stats_;
  int64_t free_pages_snapshot_ = 0;
  std::thread thread_;
};

}  // namespace

StatusOr<std::unique_ptr<Engine>> Engine::create(const EngineArgs& args) {
  ASSIGN_OR_RETURN(v4::Numerics numerics, v4::parse_numerics(args.numerics));
  if (args.policy != "fcfs" && args.policy != "priority")
    return invalid_argument("policy must be 'fcfs' or 'priority', got '" + args.policy + "'");
  if (args.max_num_seqs <= 0) return invalid_argument("max_num_seqs must be positive");
  RETURN_IF_ERROR(sched::Scheduler::validate(sched_config(args)));
  ASSIGN_OR_RETURN(
      std::unique_ptr<v4::CpuModel> model,
      v4::CpuModel::load(args.model, {numerics, std::nullopt}, [&](const v4::LoadProgress& p) {
        if (args.on_load_progress)
          args.on_load_progress(p.tensors_done, p.tensors_total, p.bytes_done, p.bytes_total);
      }));
  std::unique_ptr<tokenizer::Tokenizer> tok;
  if (std::filesystem::exists(args.model + "/tokenizer.json")) {
    ASSIGN_OR_RETURN(tok, tokenizer::Tokenizer::from_file(args.model));
  }
  // Pool pages are the CPU state layout's pages: its row packing decides their size and how
  // many hold a sequence's constant state.
  kv::KvGeometry geo = kv::kv_geometry(model->config(), /*element_bytes=*/4);
  auto layout = std::make_shared<const v4::StateLayout>(model->config(), geo.page_tokens);
  geo.page_bytes = layout->page_bytes();
  geo.constant_pages_per_seq = layout->constant_pages();
  ASSIGN_OR_RETURN(kv::KvManager kv, kv::KvManager::create(geo, args.kv_memory_bytes));
  auto e = std::make_unique<EngineImpl>(args, std::move(model), std::move(tok), std::move(kv),
                                        std::move(layout));
  return std::unique_ptr<Engine>(std::move(e));
}

}  // namespace deepinfer

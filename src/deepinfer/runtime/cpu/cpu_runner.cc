#include "deepinfer/runtime/cpu/cpu_runner.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>

#include "deepinfer/runtime/cpu/dspark_track.h"
#include "deepinfer/runtime/cpu/paged_model.h"
#include "deepinfer/runtime/cpu/step_pages.h"
#include "deepinfer/runtime/expert_group.h"
#include "deepinfer/runtime/row_snapshots.h"

namespace deepinfer::runtime::cpu {
namespace {

constexpr int kPageTokens = 128;
constexpr size_t kKeptLogitRows = 8;                     // logits rows a step buffer always keeps
constexpr int64_t kMaxPages = int64_t{1} << 24;          // kv::KvManager's clamp
constexpr int64_t kDefaultPoolBytes = int64_t{1} << 30;  // --kv-memory 0
constexpr size_t kKeptTapFloats = size_t{1} << 22;       // 16 MiB: a long chunk's taps go back

// The sampler's greedy choice: the first of the largest logits.
int32_t first_max(const float* logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<int32_t>(best);
}

class CpuRunner final : public ModelRunner {
 public:
  CpuRunner(std::unique_ptr<PagedModel> model, kv::PageSpec spec, ModelInfo info,
            Collective* expert_group)
      : expert_group_(expert_group),
        model_(std::move(model)),
        spec_(spec),
        info_(std::move(info)),
        // Uninitialized: the OS commits pages as sequences first touch them.
        arena_(new float[static_cast<size_t>(spec_.num_pages * model_->page_floats())]) {}

  const ModelInfo& info() const override { return info_; }
  std::vector<std::vector<uint64_t>> expert_counts() const override {
    return model_->routed_counts();
  }
  const kv::PageSpec& page_spec() const override { return spec_; }
  // A row in pieces would be more forwards than the other ranks of an expert-parallel group run.
  bool snapshots_inside_rows() const override { return expert_group_ == nullptr; }

  Status execute(const StepBatch& batch, StepOutput* out) override {
    Status st = execute_rows(batch, out);
    // A rank that stops part-way would leave the others waiting in an exchange: take the
    // group down, so every rank's step fails now with this error.
    if (!st.ok() && expert_group_) expert_group_->abort(st.message());
    return st;
  }

  Status execute_rows(const StepBatch& batch, StepOutput* out) {
    fork_tracks_.clear();
    for (const Rollback& r : batch.rollbacks) RETURN_IF_ERROR(roll_back(r));
    for (const kv::PageCopy& c : batch.page_copies) {
      RETURN_IF_ERROR(check_page(c.from));
      RETURN_IF_ERROR(check_page(c.to));
      RETURN_IF_ERROR(note_fork(c));
      std::memcpy(page(c.to), page(c.from), static_cast<size_t>(spec_.page_bytes));
    }
    // A burst's buffer (rows x vocab floats) goes back once steps are much smaller again, so an
    // idle server returns to its baseline; steady steps reuse it.
    int64_t wanted = 0;
    for (const StepRow& row : batch.rows)
      wanted += row.speculative ? row.num_tokens : row.wants_logits ? 1 : 0;
    const size_t need = static_cast<size_t>(wanted * info_.vocab_size);
    if (out_logits_.capacity() > 2 * need + kKeptLogitRows * info_.vocab_size)
      std::vector<float>().swap(out_logits_);
    out_logits_.clear();
    out_logits_.reserve(need);
    out_argmax_.clear();
    out->logits = nullptr;
    out->num_logit_rows = 0;
    const int64_t vocab = info_.vocab_size;
    // Expert parallelism: every rank runs as many forwards as the busiest one (idle ones for
    // the difference), so each MoE exchange has all ranks; an error takes the group down.
    int64_t group_rows = 0;
    if (expert_group_ && batch.group_step) {
      StatusOr<int64_t> most = group_max(*expert_group_, static_cast<int64_t>(batch.rows.size()));
      if (!most.ok()) return most.status();
      group_rows = *most;
    }
    for (const StepRow& row : batch.rows) {
      if (!row.snapshots.empty() && expert_group_)
        return invalid_argument("sequence " + std::to_string(row.seq_id) +
                                ": snapshots inside rows under expert parallelism");
      RETURN_IF_ERROR(check_row_snapshots(row, spec_, "sequence " + std::to_string(row.seq_id)));
      ASSIGN_OR_RETURN(PagedSequence * seq, sequence_for(row));
      Sequence& s = seqs_.at(row.seq_id);
      RETURN_IF_ERROR(settle_taps(row.seq_id, s));  // no rollback came: its row was all accepted
      s.speculated.reset();
      if (row.speculative) {
        ASSIGN_OR_RETURN(s.speculated, snapshot(row));
      }
      if (s.draft && s.draft->num_tokens() != row.start_pos)
        return internal_error("sequence " + std::to_string(row.seq_id) +
                              ": its DSpark state holds " + std::to_string(s.draft->num_tokens()) +
                              " positions, the step starts it at " + std::to_string(row.start_pos));
      // Snapshots inside the row: the row in pieces (the forward is chunking-invariant), the
      // constant pages copied at each piece's end.
      int64_t done = 0;
      for (size_t k = 0; k <= row.snapshots.size(); ++k) {
        const bool last = k == row.snapshots.size();
        const int64_t end = last ? row.num_tokens : row.snapshots[k].end_pos - row.start_pos;
        RETURN_IF_ERROR(model_->forward(*seq, row.tokens + done, end - done, row.keep_from_pos,
                                        row.speculative, &logits_, s.draft ? &taps_ : nullptr));
        if (s.draft) {  // only committed positions enter the drafter (decision 0012)
          if (row.speculative) {
            s.speculated->taps.swap(taps_);
          } else {
            RETURN_IF_ERROR(s.draft->absorb(taps_.data(), end - done));
            if (taps_.capacity() > kKeptTapFloats) std::vector<float>().swap(taps_);
          }
        }
        if (!last)
          for (size_t i = 0; i < row.snapshots[k].pages->size(); ++i)
            std::memcpy(page((*row.snapshots[k].pages)[i]), page((*row.state_pages)[i]),
                        static_cast<size_t>(spec_.page_bytes));
        done = end;
      }
      if (row.speculative) {
        out_logits_.insert(out_logits_.end(), logits_.begin(), logits_.end());
        out_argmax_.insert(out_argmax_.end(), static_cast<size_t>(row.num_tokens), -1);
        out->num_logit_rows += row.num_tokens;
        continue;
      }
      if (!row.wants_logits) continue;
      // The logits are on the host anyway: argmax_only rows get both.
      out_logits_.insert(out_logits_.end(), logits_.begin(), logits_.begin() + vocab);
      out_argmax_.push_back(row.argmax_only ? first_max(logits_.data(), vocab) : -1);
      ++out->num_logit_rows;
    }
    for (int64_t i = static_cast<int64_t>(batch.rows.size()); i < group_rows; ++i)
      RETURN_IF_ERROR(model_->expert_parallel_idle());
    out->logits = out_logits_.data();
    out->argmax = out_argmax_.data();
    return ok_status();
  }

  void release(uint64_t seq_id) override { seqs_.erase(seq_id); }

  // V4.1: DSpark's block from the sequence's track (none while it is rebuilt); V4: the MTP
  // layer's greedy drafts, chained (PagedModel::mtp_draft).
  Status mtp_draft(uint64_t seq_id, int32_t token, int64_t max_drafts,
                   std::vector<int32_t>* out) override {
    if (max_drafts < 1) return ok_status();
    auto it = seqs_.find(seq_id);
    if (it == seqs_.end() || it->second.state == nullptr)
      return invalid_argument("mtp_draft: sequence " + std::to_string(seq_id) +
                              " has no state in the runner");
    Sequence& s = it->second;
    if (!s.draft) return model_->mtp_draft(*s.state, token, max_drafts, out);
    // The step's rollbacks are done (the contract): a row still held was accepted whole.
    RETURN_IF_ERROR(settle_taps(seq_id, s));
    if (s.draft->num_tokens() != s.state->num_tokens())
      return internal_error("mtp_draft: sequence " + std::to_string(seq_id) +
                            ": its DSpark state holds " + std::to_string(s.draft->num_tokens()) +
                            " positions, its state " + std::to_string(s.state->num_tokens()));
    return s.draft->propose(token, max_drafts, out);
  }

  StatusOr<std::string> read_pages(const std::vector<int32_t>& pages) override {
    std::string bytes;
    bytes.reserve(pages.size() * static_cast<size_t>(spec_.page_bytes));
    for (int32_t p : pages) {
      RETURN_IF_ERROR(check_page(p));
      bytes.append(reinterpret_cast<const char*>(page(p)), static_cast<size_t>(spec_.page_bytes));
    }
    return bytes;
  }

  Status write_pages(const std::vector<int32_t>& pages, std::string_view bytes) override {
    if (bytes.size() != pages.size() * static_cast<size_t>(spec_.page_bytes))
      return invalid_argument("write_pages: " + std::to_string(bytes.size()) + " bytes for " +
                              std::to_string(pages.size()) + " pages of " +
                              std::to_string(spec_.page_bytes) + " bytes");
    for (size_t i = 0; i < pages.size(); ++i) {
      RETURN_IF_ERROR(check_page(pages[i]));
      std::memcpy(page(pages[i]), bytes.data() + i * spec_.page_bytes,
                  static_cast<size_t>(spec_.page_bytes));
    }
    return ok_status();
  }

 private:
  // What a speculative row needs to be rolled back: the sequence's constant pages as they were
  // before it (rings and compressor partial windows change in place; growing state is
  // positional and rewritten) and its tokens, to replay the accepted ones.
  // With DSpark, also the row's taps: absorbed up to the verified length once it is known.
  struct Speculated {
    int64_t start_pos = 0;
    std::vector<int32_t> tokens;
    std::vector<int32_t> constant_pages;
    std::string constant_bytes;
    std::vector<float> taps;     // num_tokens rows (DSpark only)
    bool taps_absorbed = false;  // all of them, the row taken as accepted whole
  };
  struct Sequence {
    std::unique_ptr<PagedSequence> state;
    StepPages* pages = nullptr;              // owned by state
    std::unique_ptr<Speculated> speculated;  // its latest row was speculative
    std::unique_ptr<DsparkTrack> draft;      // V4.1 drafting: the DSpark state, beside the pages
    int32_t first_constant_page = -1;        // names the sequence in a fork's page copies
  };

  // A speculative row nobody rolled back was accepted whole: its taps enter the drafter.
  Status settle_taps(uint64_t seq_id, Sequence& s) {
    if (!s.draft || !s.speculated || s.speculated->taps_absorbed) return ok_status();
    Speculated& h = *s.speculated;
    if (s.draft->num_tokens() != h.start_pos)
      return internal_error("sequence " + std::to_string(seq_id) + ": its DSpark state holds " +
                            std::to_string(s.draft->num_tokens()) +
                            " positions, its speculative row started at " +
                            std::to_string(h.start_pos));
    h.taps_absorbed = true;
    return s.draft->absorb(h.taps.data(), static_cast<int64_t>(h.tokens.size()));
  }

  // n > 1 forks copy the parent's constant pages to the child (kv::KvManager::fork): a copy of a
  // live sequence's first constant page hands the child a copy of the parent's DSpark state, as
  // of now (rows run after the copies), for the child's first row in this step. Other copies
  // (prefix-cache attaches, snapshots) come from pages no live sequence starts with.
  Status note_fork(const kv::PageCopy& c) {
    if (model_->dspark() == nullptr) return ok_status();
    for (auto& [id, s] : seqs_) {
      if (s.first_constant_page != c.from || !s.draft) continue;
      RETURN_IF_ERROR(settle_taps(id, s));
      fork_tracks_.insert_or_assign(c.to, std::make_unique<DsparkTrack>(*s.draft));
      return ok_status();
    }
    fork_tracks_.erase(c.to);
    return ok_status();
  }

  StatusOr<std::unique_ptr<Speculated>> snapshot(const StepRow& row) {
    auto s = std::make_unique<Speculated>();
    s->start_pos = row.start_pos;
    s->tokens.assign(row.tokens, row.tokens + row.num_tokens);
    s->constant_pages.assign(row.state_pages->begin(),
                             row.state_pages->begin() + model_->constant_pages());
    ASSIGN_OR_RETURN(s->constant_bytes, read_pages(s->constant_pages));
    return s;
  }

  // Restores the constant pages, adopts the sequence at the speculative row's start and replays
  // the accepted tokens: the CPU forward is chunking-invariant, so this is the state a run
  // without speculation has, bit for bit.
  Status roll_back(const Rollback& r) {
    auto it = seqs_.find(r.seq_id);
    if (it == seqs_.end() || it->second.speculated == nullptr)
      return invalid_argument("rollback of sequence " + std::to_string(r.seq_id) +
                              ": its latest row was not speculative");
    const Speculated& held = *it->second.speculated;
    const int64_t end = held.start_pos + static_cast<int64_t>(held.tokens.size());
    if (r.num_tokens < held.start_pos || r.num_tokens > end)
      return out_of_range("rollback of sequence " + std::to_string(r.seq_id) + " to " +
                          std::to_string(r.num_tokens) + " tokens: its speculative row allows [" +
                          std::to_string(held.start_pos) + ", " + std::to_string(end) + "]");
    if (r.state_pages == nullptr || r.block_table == nullptr)
      return invalid_argument("rollback of sequence " + std::to_string(r.seq_id) +
                              " has no page tables");
    if (r.num_tokens == end) {  // every draft accepted: nothing to undo
      RETURN_IF_ERROR(settle_taps(r.seq_id, it->second));
      it->second.speculated.reset();
      return ok_status();
    }
    std::unique_ptr<Speculated> spec = std::move(it->second.speculated);
    std::unique_ptr<DsparkTrack> draft = std::move(it->second.draft);
    RETURN_IF_ERROR(write_pages(spec->constant_pages, spec->constant_bytes));
    StepRow replay;
    replay.seq_id = r.seq_id;
    replay.start_pos = spec->start_pos;
    replay.state_pages = r.state_pages;
    replay.block_table = r.block_table;
    seqs_.erase(it);  // adopted afresh from the restored pages
    ASSIGN_OR_RETURN(PagedSequence * seq, sequence_for(replay));
    if (draft) {
      // The drafter takes the verified rows' taps, computed by the speculative row (the forward
      // is chunking-invariant). Taps already taken whole (a draft asked before this rollback)
      // cannot be taken back: the track restarts and drafts again once its window refills.
      if (spec->taps_absorbed) {
        draft = std::make_unique<DsparkTrack>(*model_->dspark(), r.num_tokens);
      } else {
        RETURN_IF_ERROR(draft->absorb(spec->taps.data(), r.num_tokens - spec->start_pos));
      }
      seqs_.at(r.seq_id).draft = std::move(draft);
    }
    if (r.num_tokens == spec->start_pos) return ok_status();
    // No taps: the drafter has the accepted ones already.
    return model_->forward(*seq, spec->tokens.data(), r.num_tokens - spec->start_pos, 0, false,
                           &logits_, nullptr);
  }

  float* page(int32_t p) const { return arena_.get() + int64_t{p} * model_->page_floats(); }
  Status check_page(int32_t p) const {
    if (p < 0 || p >= spec_.num_pages)
      return out_of_range("page " + std::to_string(p) + " is outside the pool of " +
                          std::to_string(spec_.num_pages));
    return ok_status();
  }

  // The row's sequence bound to the row's pages: fresh at position 0, adopted from the pages
  // when the runner hasn't seen the sequence (a fork's copies), else the one it keeps. With
  // DSpark a new sequence gets its track: fresh at 0, its parent's after a fork, else one that
  // rebuilds its window before it drafts.
  StatusOr<PagedSequence*> sequence_for(const StepRow& row) {
    if (row.state_pages == nullptr || row.block_table == nullptr)
      return invalid_argument("step row of sequence " + std::to_string(row.seq_id) +
                              " has no page tables");
    auto it = seqs_.find(row.seq_id);
    if (row.start_pos == 0 || it == seqs_.end()) {
      auto pages = std::make_unique<StepPages>(arena_.get(), model_->page_floats());
      StepPages* raw = pages.get();
      raw->bind(row.state_pages, row.block_table);
      Sequence s;
      s.pages = raw;
      s.state = model_->start(std::move(pages), row.start_pos);
      if (!row.state_pages->empty()) s.first_constant_page = row.state_pages->front();
      if (const v41::DsparkDrafter* d = model_->dspark()) {
        auto parent = fork_tracks_.find(s.first_constant_page);
        if (row.start_pos > 0 && parent != fork_tracks_.end() &&
            parent->second->num_tokens() == row.start_pos)
          s.draft = std::move(parent->second);
        else
          s.draft = std::make_unique<DsparkTrack>(*d, row.start_pos);
        if (parent != fork_tracks_.end()) fork_tracks_.erase(parent);
      }
      it = seqs_.insert_or_assign(row.seq_id, std::move(s)).first;
    }
    Sequence& s = it->second;
    if (s.state->num_tokens() != row.start_pos)
      return internal_error("sequence " + std::to_string(row.seq_id) + " holds " +
                            std::to_string(s.state->num_tokens()) +
                            " tokens, the step starts it at " + std::to_string(row.start_pos));
    s.pages->bind(row.state_pages, row.block_table);
    return s.state.get();
  }

  Collective* expert_group_;  // null: one rank
  std::unique_ptr<PagedModel> model_;
  kv::PageSpec spec_;
  ModelInfo info_;
  std::unique_ptr<float[]> arena_;
  std::unordered_map<uint64_t, Sequence> seqs_;
  // This step's forks: the parent's DSpark state by the child's first constant page.
  std::unordered_map<int32_t, std::unique_ptr<DsparkTrack>> fork_tracks_;
  std::vector<float> logits_;
  std::vector<float> taps_;          // the latest forward's DSpark input
  std::vector<float> out_logits_;    // StepOutput::logits of the latest step
  std::vector<int32_t> out_argmax_;  // StepOutput::argmax of the latest step
};

}  // namespace

StatusOr<std::unique_ptr<ModelRunner>> create_cpu_runner(const RunnerOptions& o) {
  ASSIGN_OR_RETURN(std::unique_ptr<PagedModel> model, load_paged_model(o, kPageTokens));
  kv::PageSpec spec;
  spec.page_tokens = kPageTokens;
  spec.page_bytes = model->page_floats() * 4;
  spec.constant_pages_per_seq = model->constant_pages();
  const int64_t pool_bytes = o.kv_memory_bytes == 0 ? kDefaultPoolBytes : o.kv_memory_bytes;
  spec.num_pages = std::min(pool_bytes < 0 ? 0 : pool_bytes / spec.page_bytes, kMaxPages);
  if (spec.num_pages < spec.constant_pages_per_seq + 1)
    return invalid_argument("--kv-memory " + std::to_string(pool_bytes) +
                            " bytes can't hold one sequence: " + "it needs " +
                            std::to_string((spec.constant_pages_per_seq + 1) * spec.page_bytes) +
                            " bytes (" + std::to_string(spec.constant_pages_per_seq) +
                            " pages of constant state + 1 page of " +
                            std::to_string(spec.page_tokens) + " tokens, " +
                            std::to_string(spec.page_bytes) + " bytes each)");
  ModelInfo info = model->info();
  info.device = Device::kCpu;
  info.device_name = "cpu";
  return std::unique_ptr<ModelRunner>(
      new CpuRunner(std::move(model), spec, std::move(info), o.expert_group));
}

}  // namespace deepinfer::runtime::cpu

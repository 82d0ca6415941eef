#include "deepinfer/runtime/cuda/cuda_runner.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "deepinfer/model/config_field_reader.h"
#include "deepinfer/model/deepseek_v41/config.h"
#include "deepinfer/model/model_family.h"
#include "deepinfer/runtime/cuda/dspark_tracks.h"
#include "deepinfer/runtime/cuda/forward/cuda_model.h"
#include "deepinfer/runtime/cuda/forward/pinned_buffer.h"
#include "deepinfer/runtime/cuda/forward_v41/cuda_v41_model.h"
#include "deepinfer/runtime/cuda/ipc_pages.h"
#include "deepinfer/runtime/row_snapshots.h"

namespace deepinfer::runtime::cuda {
namespace {

using ::deepinfer::cuda::CudaModel;
using ::deepinfer::cuda::CudaModelOptions;
using ::deepinfer::cuda::CudaV41Model;
using ::deepinfer::cuda::PagedForward;
using ::deepinfer::cuda::PagedSequence;
using ::deepinfer::cuda::PinnedBuffer;

// Prefill rows run in chunks of at most min(--max-num-batched-tokens, this) tokens, which sizes
// the forward's scratch. Longer chunks pay off past 2048 in the forward (each routed expert reads
// its weights once a chunk: a 4096-token prompt as one chunk took 105.6 against 116.7 ms in two
// on an H100, decision 0019), so the cap only bounds the scratch of a mistaken budget.
constexpr int64_t kMaxChunk = 8192;

// Tokens per page of growing state, as the CPU runner's: one StateLayout for both.
constexpr int kPageTokens = 128;

// "1.25 GiB", or "3.5 MiB" below a GiB (the tiny test models).
std::string bytes_text(int64_t bytes) {
  char b[32];
  if (bytes >= (int64_t{1} << 30))
    std::snprintf(b, sizeof b, "%.2f GiB", double(bytes) / double(int64_t{1} << 30));
  else
    std::snprintf(b, sizeof b, "%.1f MiB", double(bytes) / double(int64_t{1} << 20));
  return b;
}

std::string row_name(size_t i, const StepRow& r) {
  return "row " + std::to_string(i) + " (sequence " + std::to_string(r.seq_id) + ")";
}

class CudaRunner final : public ModelRunner {
 public:
  CudaRunner(std::unique_ptr<PagedForward> model, ModelInfo info, kv::PageSpec spec,
             int64_t max_model_len, int64_t max_rows)
      : model_(std::move(model)),
        info_(std::move(info)),
        spec_(spec),
        max_model_len_(max_model_len),
        max_rows_(max_rows),
        page_row_(spec.num_pages, -1) {
    drafting_on_ = model_->final_stream_floats() > 0;
    if (deepinfer::cuda::v41f::CudaDspark* d = model_->dspark())
      dspark_ = std::make_unique<DsparkTracks>(*d);
  }

  const ModelInfo& info() const override { return info_; }
  const kv::PageSpec& page_spec() const override { return spec_; }
  bool snapshots_inside_rows() const override { return model_->takes_row_snapshots(); }
  Status execute(const StepBatch& batch, StepOutput* out) override;
  // A sequence's pages and their token count (the row's start_pos) are its whole state; the
  // runner keeps only a speculative row's snapshot, until the sequence's next row or rollback.
  void release(uint64_t seq_id) override {
    speculated_.erase(seq_id);
    drafting_.erase(seq_id);
    pending_.erase(seq_id);
    if (dspark_) dspark_->release(seq_id);
  }
  Status mtp_draft(uint64_t seq_id, int32_t token, int64_t max_drafts,
                   std::vector<int32_t>* out) override {
    std::vector<std::vector<int32_t>> all;
    RETURN_IF_ERROR(mtp_draft_batch({seq_id}, {token}, {max_drafts}, &all));
    out->insert(out->end(), all[0].begin(), all[0].end());
    return ok_status();
  }
  Status mtp_draft_batch(const std::vector<uint64_t>& seq_ids, const std::vector<int32_t>& tokens,
                         const std::vector<int64_t>& max_drafts,
                         std::vector<std::vector<int32_t>>* out) override;
  StatusOr<std::string> read_pages(const std::vector<int32_t>& pages) override;
  Status write_pages(const std::vector<int32_t>& pages, std::string_view bytes) override;
  StatusOr<DevicePages> export_pages_ipc(const std::vector<int32_t>& pages) override {
    RETURN_IF_ERROR(flush_replays());
    ASSIGN_OR_RETURN(DevicePages d, device_buffer(int64_t(pages.size()) * spec_.page_bytes));
    RETURN_IF_ERROR(model_->read_pages(pages.data(), int64_t(pages.size()), d.buffer.get()));
    RETURN_IF_ERROR(export_ipc_handle(&d));
    return d;
  }
  StatusOr<DevicePages> map_ipc_pages(const std::string& ipc_handle, int64_t bytes) override {
    return copy_ipc_buffer(ipc_handle, bytes);
  }
  Status write_pages_device(const std::vector<int32_t>& pages, const DevicePages& src) override {
    RETURN_IF_ERROR(check_page_bytes("write_pages_device", pages, src.buffer ? src.bytes : -1));
    RETURN_IF_ERROR(flush_replays());
    return model_->write_pages(pages.data(), int64_t(pages.size()), src.buffer.get());
  }

 private:
  // A rollback's replay of its accepted tokens, from its row's start, not yet run.
  struct PendingReplay {
    int64_t start = 0;
    std::vector<int32_t> tokens;
    std::vector<int32_t> constant_pages, block_table;
  };
  // invalid_argument naming `what` unless `bytes` is exactly pages.size() pages.
  Status check_page_bytes(const char* what, const std::vector<int32_t>& pages,
                          int64_t bytes) const {
    if (bytes == int64_t(pages.size()) * spec_.page_bytes) return ok_status();
    return invalid_argument(std::string(what) + ": " + std::to_string(bytes) + " bytes for " +
                            std::to_string(pages.size()) + " pages of " +
                            std::to_string(spec_.page_bytes) + " bytes");
  }
  // Every check of a batch before any state changes; splits its rows into the decode group and
  // the prefill rows (speculative rows among them).
  Status plan(const StepBatch& batch);
  Status check_rollbacks(const StepBatch& batch);
  Status roll_back(const StepBatch& batch);
  Status snapshot(const StepRow& r);
  // Runs the pending replays `which` picks (null: all) in one verify_paged call without logits.
  Status flush_replays(const std::function<bool(uint64_t)>& which = nullptr);
  // Whether this step needs sequence id's pending replay run first: it has a row that does not
  // carry it, or a page copy touches its pages.
  bool must_flush(const StepBatch& batch, uint64_t id) const;
  // The replay speculative row r can carry at its front (a pending one, or one this batch's
  // rollback leaves), or none: it must end where the row starts, in the row's constant pages,
  // and no page copy of this step may touch those (a copy reads the state the replay makes).
  std::optional<PendingReplay> fusable(const StepBatch& batch, const StepRow& r) const;
  bool fusable_pending(const PendingReplay& p, const StepRow& r) const;
  // Whether a page copy of this step reads or writes any of `pages`.
  bool copies_touch(const std::vector<int32_t>& pages) const;
  // With drafting: the row's sequence with final_streams set to its draft record's buffer,
  // grown to `rows` rows; with DSpark, taps set to its track's buffer for `taps_rows` rows from
  // position first_pos (a fused row starts before its StepRow).
  StatusOr<PagedSequence> drafting_sequence(const StepRow& r, int64_t rows, int64_t first_pos,
                                            int64_t taps_rows);
  // After a row ran (behind `prefix` recomputed tokens): its record's last computed position;
  // a plain row's taps enter its DSpark windows.
  Status note_row(const StepRow& r, int64_t prefix);
  PagedSequence sequence(const StepRow& r) const {
    PagedSequence q;
    q.constant_pages = r.state_pages->data();
    q.token_pages = r.block_table->data();
    q.num_token_pages = static_cast<int64_t>(r.block_table->size());
    q.num_tokens = r.start_pos;
    return q;
  }

  // What a speculative row needs to be rolled back, as the CPU runner keeps it: the sequence's
  // constant pages as they were before the row (rings and compressor partial windows change in
  // place; growing state is positional and rewritten), in a device buffer, and the row's
  // tokens, to replay the accepted ones. The buffer stays with the sequence for its next row.
  struct Speculated {
    bool held = false;  // the sequence's latest row was speculative and not yet settled
    int64_t start_pos = 0;
    std::vector<int32_t> tokens;
    std::vector<int32_t> constant_pages;
    DevicePages snapshot;
  };
  // The replay a rollback of h to num_tokens leaves: its accepted tokens from h's start.
  static PendingReplay replay_of(const Speculated& h, int64_t num_tokens) {
    PendingReplay p;
    p.start = h.start_pos;
    p.tokens.assign(h.tokens.begin(), h.tokens.begin() + (num_tokens - h.start_pos));
    p.constant_pages = h.constant_pages;
    return p;
  }

  std::unique_ptr<PagedForward> model_;
  ModelInfo info_;
  kv::PageSpec spec_;
  int64_t max_model_len_;
  int64_t max_rows_;  // the most ids one sequence brings to a forward (CudaModelOptions::max_chunk)
  // Per-step staging, kept so a warm step allocates nothing.
  std::vector<int64_t> page_row_;  // [num_pages]: the row of this step writing the page, or -1
  std::vector<int32_t> written_;   // the pages set above, reset by the next plan
  std::vector<int32_t> copy_from_, copy_to_;
  std::vector<size_t> decode_rows_, verify_rows_, prefill_rows_;  // row indices
  std::vector<PagedSequence> verify_seqs_;  // the speculative rows', one verify_paged call
  std::vector<int32_t> verify_ids_;
  std::vector<int64_t> verify_counts_;
  std::vector<float*> verify_out_;
  std::vector<PagedSequence> replay_seqs_;  // the step's rollbacks' replays, one call
  std::vector<int32_t> replay_ids_;
  std::vector<int64_t> replay_counts_;
  std::unordered_map<uint64_t, PendingReplay> pending_;
  // Per row of the step: the replay riding at its front (tokens empty: none); the sequences so
  // fused; per verify row, the rows whose logits verify_paged skips.
  std::vector<PendingReplay> fused_;
  std::unordered_set<uint64_t> fused_seqs_;
  std::vector<int64_t> verify_skip_;
  std::vector<PagedSequence> decode_seqs_;
  std::vector<::deepinfer::cuda::PagedSnapshot> row_snapshots_;  // a prefill row's
  std::vector<int32_t> decode_ids_;
  std::vector<int64_t> out_row_;                 // per row: its logits row in the output, or -1
  std::vector<int32_t> decode_argmax_, argmax_;  // the decode group's, StepOutput::argmax
  // StepOutput::logits rows, then (in a mixed step) the decode group's rows before they are
  // placed among them.
  PinnedBuffer<float> logits_;
  std::unordered_map<uint64_t, Speculated> speculated_;
  // Drafting (RunnerOptions::drafting with a model that drafts): per sequence the final streams
  // of its latest rows (the MTP layer's input) and where its state stands.
  struct Drafting {
    DevicePages streams;  // rows x final_stream_floats()
    int64_t rows = 0;
    int64_t last = -1;  // the row holding the last computed position's streams; -1: none
    int64_t num_tokens = 0;
    std::vector<int32_t> constant_pages;
  };
  bool drafting_on_ = false;
  std::unique_ptr<DsparkTracks> dspark_;  // deepseek_v41 with its drafter loaded
  std::unordered_map<uint64_t, Drafting> drafting_;
  std::unordered_set<uint64_t> rolled_;  // check_rollbacks' duplicates
};

Status CudaRunner::check_rollbacks(const StepBatch& batch) {
  rolled_.clear();
  for (const Rollback& r : batch.rollbacks) {
    const std::string who = "rollback of sequence " + std::to_string(r.seq_id);
    auto it = speculated_.find(r.seq_id);
    if (it == speculated_.end() || !it->second.held)
      return invalid_argument(who + ": its latest row was not speculative");
    if (!rolled_.insert(r.seq_id).second) return invalid_argument(who + ": twice in one step");
    const Speculated& h = it->second;
    const int64_t end = h.start_pos + int64_t(h.tokens.size());
    if (r.num_tokens < h.start_pos || r.num_tokens > end)
      return out_of_range(who + " to " + std::to_string(r.num_tokens) +
                          " tokens: its speculative row allows [" + std::to_string(h.start_pos) +
                          ", " + std::to_string(end) + "]");
    if (r.state_pages == nullptr || r.block_table == nullptr)
      return invalid_argument(who + " has no page tables");
    if (*r.state_pages != h.constant_pages)
      return internal_error(who + ": its constant pages are not those of its speculative row");
    const int64_t need = (r.num_tokens + spec_.page_tokens - 1) / spec_.page_tokens;
    if (int64_t(r.block_table->size()) < need)
      return internal_error(who + ": a block table of " + std::to_string(r.block_table->size()) +
                            " pages for " + std::to_string(r.num_tokens) + " positions needs " +
                            std::to_string(need));
  }
  return ok_status();
}

// Restores each cut sequence's constant pages and leaves the accepted tokens' replay pending
// (pending_): the sequence's next speculative row recomputes them at its front (fused_),
// or flush_replays() replays them before anything reads or copies its pages. A drafter between
// the two (MTP) reads only its own ring and the verified streams, never the main layers' state.
// With batch invariance the forward is chunking-invariant, so either way the state is bit for bit
// a run without speculation's; without it, a prefill chunk's roundings of those tokens.
Status CudaRunner::roll_back(const StepBatch& batch) {
  for (const Rollback& r : batch.rollbacks) {
    Speculated& h = speculated_.at(r.seq_id);
    h.held = false;
    // The speculative row left every position's streams; the last accepted one is row
    // num_tokens - start - 1 (a replay rewrites the same rows).
    if (auto d = drafting_.find(r.seq_id); d != drafting_.end()) {
      d->second.last = r.num_tokens > h.start_pos ? r.num_tokens - h.start_pos - 1 : -1;
      d->second.num_tokens = r.num_tokens;
    }
    if (r.num_tokens == h.start_pos + int64_t(h.tokens.size())) continue;  // all kept
    RETURN_IF_ERROR(model_->write_pages(h.constant_pages.data(), int64_t(h.constant_pages.size()),
                                        h.snapshot.buffer.get()));
    if (r.num_tokens == h.start_pos) continue;
    PendingReplay& p = pending_[r.seq_id] = replay_of(h, r.num_tokens);
    p.block_table = *r.block_table;
  }
  return ok_status();
}

Status CudaRunner::flush_replays(const std::function<bool(uint64_t)>& which) {
  replay_seqs_.clear();
  replay_ids_.clear();
  replay_counts_.clear();
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (which && !which(it->first)) {
      ++it;
      continue;
    }
    const PendingReplay& p = it->second;
    PagedSequence q;
    q.constant_pages = p.constant_pages.data();
    q.token_pages = p.block_table.data();
    q.num_token_pages = int64_t(p.block_table.size());
    q.num_tokens = p.start;
    if (auto d = drafting_.find(it->first); d != drafting_.end())
      q.final_streams = static_cast<float*>(d->second.streams.buffer.get());
    replay_seqs_.push_back(q);
    replay_ids_.insert(replay_ids_.end(), p.tokens.begin(), p.tokens.end());
    replay_counts_.push_back(int64_t(p.tokens.size()));
    ++it;
  }
  Status st = ok_status();
  if (!replay_seqs_.empty())
    st = model_->verify_paged(replay_seqs_.data(), replay_ids_.data(), replay_counts_.data(),
                              int64_t(replay_seqs_.size()), nullptr);
  for (auto it = pending_.begin(); it != pending_.end();)
    it = which && !which(it->first) ? std::next(it) : pending_.erase(it);
  return st;
}

StatusOr<PagedSequence> CudaRunner::drafting_sequence(const StepRow& r, int64_t rows,
                                                      int64_t first_pos, int64_t taps_rows) {
  PagedSequence q = sequence(r);
  if (dspark_) {
    ASSIGN_OR_RETURN(q.taps,
                     dspark_->taps_for(r.seq_id, first_pos, taps_rows,
                                       r.state_pages->empty() ? -1 : r.state_pages->front()));
  }
  if (!drafting_on_) return q;
  Drafting& d = drafting_[r.seq_id];
  if (d.rows < rows) {
    const int64_t want = std::max<int64_t>(rows, 8);  // a verification of 7 drafts fits
    d.streams = {};
    ASSIGN_OR_RETURN(d.streams, device_buffer(want * model_->final_stream_floats() * 4));
    d.rows = want;
    d.last = -1;
  }
  q.final_streams = static_cast<float*>(d.streams.buffer.get());
  return q;
}

Status CudaRunner::note_row(const StepRow& r, int64_t prefix) {
  if (dspark_) RETURN_IF_ERROR(dspark_->after_row(r.seq_id, r.speculative));
  auto it = drafting_.find(r.seq_id);
  if (it == drafting_.end()) return ok_status();
  it->second.last = r.speculative ? prefix + r.num_tokens - 1 : 0;
  it->second.num_tokens = r.start_pos + r.num_tokens;
  it->second.constant_pages = *r.state_pages;
  return ok_status();
}

Status CudaRunner::mtp_draft_batch(const std::vector<uint64_t>& seq_ids,
                                   const std::vector<int32_t>& tokens,
                                   const std::vector<int64_t>& max_drafts,
                                   std::vector<std::vector<int32_t>>* out) {
  out->assign(seq_ids.size(), {});
  if (dspark_) {  // one proposal per sequence (a block of drafts in one pass each)
    for (size_t i = 0; i < seq_ids.size(); ++i)
      RETURN_IF_ERROR(
          dspark_->draft(seq_ids[i], tokens[i], max_drafts[i], max_model_len_, &(*out)[i]));
    return ok_status();
  }
  if (!drafting_on_)  // the model says why: no drafter, or loaded without drafting
    return model_->mtp_draft(nullptr, nullptr, nullptr, 0, 0, nullptr);
  // Sequences whose last position's streams are known (a restart from cached or imported pages
  // drafts once a row has run), each drafting the most any asks for, within max_model_len.
  int64_t k = 0;
  for (size_t i = 0; i < seq_ids.size(); ++i) k = std::max(k, max_drafts[i]);
  std::vector<PagedSequence> seqs;
  std::vector<const float*> hidden;
  std::vector<int32_t> toks;
  std::vector<size_t> asked;
  const int64_t per = model_->final_stream_floats();
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    auto it = drafting_.find(seq_ids[i]);
    if (max_drafts[i] < 1 || it == drafting_.end() || it->second.last < 0 ||
        it->second.num_tokens + k > max_model_len_)
      continue;
    const Drafting& d = it->second;
    PagedSequence q;
    q.constant_pages = d.constant_pages.data();
    q.num_tokens = d.num_tokens;
    seqs.push_back(q);
    hidden.push_back(static_cast<const float*>(d.streams.buffer.get()) + d.last * per);
    toks.push_back(tokens[i]);
    asked.push_back(i);
  }
  std::vector<int32_t> drafts(seqs.size() * size_t(k));
  const int64_t group = std::max<int64_t>(1, model_->max_decode_rows());
  for (int64_t b0 = 0; b0 < int64_t(seqs.size()); b0 += group) {
    const int64_t n = std::min<int64_t>(group, int64_t(seqs.size()) - b0);
    RETURN_IF_ERROR(
        model_->mtp_draft(&seqs[b0], &toks[b0], &hidden[b0], n, k, drafts.data() + b0 * k));
  }
  for (size_t b = 0; b < asked.size(); ++b) {
    const int32_t* row = drafts.data() + b * k;
    (*out)[asked[b]].assign(row, row + max_drafts[asked[b]]);
  }
  return ok_status();
}

Status CudaRunner::snapshot(const StepRow& r) {
  Speculated& h = speculated_[r.seq_id];
  const int64_t bytes = int64_t(r.state_pages->size()) * spec_.page_bytes;
  if (h.snapshot.bytes != bytes) {
    h.snapshot = {};  // the old buffer goes first
    ASSIGN_OR_RETURN(h.snapshot, device_buffer(bytes));
  }
  RETURN_IF_ERROR(model_->read_pages(r.state_pages->data(), int64_t(r.state_pages->size()),
                                     h.snapshot.buffer.get()));
  h.start_pos = r.start_pos;
  h.tokens.assign(r.tokens, r.tokens + r.num_tokens);
  h.constant_pages = *r.state_pages;
  h.held = true;
  return ok_status();
}

std::optional<CudaRunner::PendingReplay> CudaRunner::fusable(const StepBatch& batch,
                                                             const StepRow& r) const {
  // A rollback of this batch leaves its replay pending first (roll_back runs before the rows).
  for (const Rollback& b : batch.rollbacks) {
    if (b.seq_id != r.seq_id) continue;
    const Speculated& h = speculated_.at(b.seq_id);
    if (b.num_tokens == h.start_pos || b.num_tokens == h.start_pos + int64_t(h.tokens.size()))
      return std::nullopt;  // nothing to replay
    PendingReplay p = replay_of(h, b.num_tokens);
    if (!fusable_pending(p, r)) return std::nullopt;
    return p;
  }
  auto it = pending_.find(r.seq_id);
  if (it == pending_.end() || !fusable_pending(it->second, r)) return std::nullopt;
  return it->second;
}

bool CudaRunner::copies_touch(const std::vector<int32_t>& pages) const {
  for (const std::vector<int32_t>* copied : {&copy_from_, &copy_to_})
    for (int32_t page : *copied)
      if (std::find(pages.begin(), pages.end(), page) != pages.end()) return true;
  return false;
}

bool CudaRunner::must_flush(const StepBatch& batch, uint64_t id) const {
  for (const StepRow& r : batch.rows)
    if (r.seq_id == id) return true;  // the fused ones left pending_ before this is asked
  const PendingReplay& p = pending_.at(id);
  return copies_touch(p.constant_pages) || copies_touch(p.block_table);
}

bool CudaRunner::fusable_pending(const PendingReplay& p, const StepRow& r) const {
  // A fused row's snapshot sits at its replay's start, so a rollback of it replays that prefix
  // again: fused without a bound, steps that keep only the sampled token would grow the prefix by
  // one each (measured: acceptance 0 at 0.23x of plain decoding). At most a row's length of
  // prefix, then a replay of its own resets it.
  return p.start + int64_t(p.tokens.size()) == r.start_pos && p.constant_pages == *r.state_pages &&
         int64_t(p.tokens.size()) <= r.num_tokens &&
         int64_t(p.tokens.size()) + r.num_tokens <= max_rows_ && !copies_touch(p.constant_pages);
}

Status CudaRunner::plan(const StepBatch& batch) {
  RETURN_IF_ERROR(check_rollbacks(batch));
  if (dspark_) {  // the kept taps enter the windows before the rows' taps replace them
    for (const Rollback& b : batch.rollbacks)
      RETURN_IF_ERROR(dspark_->on_rollback(b.seq_id, b.num_tokens));
    for (const kv::PageCopy& pc : batch.page_copies)
      RETURN_IF_ERROR(dspark_->on_copy(pc.from, pc.to));
  }
  for (int32_t p : written_) page_row_[p] = -1;
  written_.clear();
  copy_from_.clear();
  copy_to_.clear();
  for (const kv::PageCopy& pc : batch.page_copies) {
    copy_from_.push_back(pc.from);
    copy_to_.push_back(pc.to);
  }
  decode_rows_.clear();
  verify_rows_.clear();
  prefill_rows_.clear();
  verify_seqs_.clear();
  verify_ids_.clear();
  verify_counts_.clear();
  decode_seqs_.clear();
  decode_ids_.clear();
  verify_skip_.clear();
  fused_seqs_.clear();
  fused_.assign(batch.rows.size(), {});
  const int64_t pt = spec_.page_tokens;
  for (size_t i = 0; i < batch.rows.size(); ++i) {
    const StepRow& r = batch.rows[i];
    if (r.num_tokens < 1 || r.tokens == nullptr)
      return invalid_argument(row_name(i, r) + ": no tokens");
    if (r.start_pos < 0 || r.start_pos + r.num_tokens > max_model_len_)
      return out_of_range(row_name(i, r) + ": positions [" + std::to_string(r.start_pos) + ", " +
                          std::to_string(r.start_pos + r.num_tokens) + ") exceed --max-model-len " +
                          std::to_string(max_model_len_));
    if (!r.state_pages || int64_t(r.state_pages->size()) != spec_.constant_pages_per_seq)
      return internal_error(
          row_name(i, r) + ": " + std::to_string(r.state_pages ? r.state_pages->size() : 0) +
          " constant pages, the layout has " + std::to_string(spec_.constant_pages_per_seq));
    const int64_t need = (r.start_pos + r.num_tokens + pt - 1) / pt;
    if (!r.block_table || int64_t(r.block_table->size()) < need)
      return internal_error(row_name(i, r) + ": a block table of " +
                            std::to_string(r.block_table ? r.block_table->size() : 0) +
                            " pages for " + std::to_string(r.start_pos + r.num_tokens) +
                            " positions needs " + std::to_string(need));
    // The pages a row writes: its constant pages and the token pages its new tokens fall in. Two
    // rows writing one page would race on the device.
    auto claim = [&](int32_t page) -> Status {
      if (page < 0 || page >= spec_.num_pages)
        return internal_error(row_name(i, r) + ": page " + std::to_string(page) +
                              " is outside the pool of " + std::to_string(spec_.num_pages) +
                              " pages");
      if (page_row_[page] >= 0 && page_row_[page] != int64_t(i))
        return internal_error(row_name(i, r) + ": page " + std::to_string(page) +
                              " is also written by row " + std::to_string(page_row_[page]) +
                              " of this step");
      if (page_row_[page] < 0) written_.push_back(page);
      page_row_[page] = int64_t(i);
      return ok_status();
    };
    for (int32_t p : *r.state_pages) RETURN_IF_ERROR(claim(p));
    RETURN_IF_ERROR(check_row_snapshots(r, spec_, row_name(i, r)));
    if (!r.snapshots.empty() && !model_->takes_row_snapshots())
      return invalid_argument(row_name(i, r) + ": snapshots inside a row (" + info_.model_type +
                              " on the GPU takes none)");
    for (const runtime::RowSnapshot& sn : r.snapshots)
      for (int32_t p : *sn.pages) RETURN_IF_ERROR(claim(p));
    for (int64_t k = r.start_pos / pt; k < need; ++k) RETURN_IF_ERROR(claim((*r.block_table)[k]));
    for (int64_t t = 0; t < r.num_tokens; ++t)
      if (r.tokens[t] < 0 || r.tokens[t] >= info_.vocab_size)
        return invalid_argument(row_name(i, r) + ": token id " + std::to_string(r.tokens[t]) +
                                " at position " + std::to_string(r.start_pos + t) +
                                " is outside the vocabulary (" + std::to_string(info_.vocab_size) +
                                ")");
    if (r.speculative) {
      if (r.start_pos == 0)
        return invalid_argument(row_name(i, r) + ": a speculative row starts at position 0");
      verify_rows_.push_back(i);
      const std::optional<PendingReplay> fused = fusable(batch, r);
      const int64_t prefix = fused ? int64_t(fused->tokens.size()) : 0;
      ASSIGN_OR_RETURN(PagedSequence q, drafting_sequence(r, prefix + r.num_tokens,
                                                          fused ? fused->start : r.start_pos,
                                                          prefix + r.num_tokens));
      if (fused) {  // the accepted tokens first, from the restored snapshot's position
        q.num_tokens = fused->start;
        verify_ids_.insert(verify_ids_.end(), fused->tokens.begin(), fused->tokens.end());
        for (int64_t k = fused->start / pt; k < r.start_pos / pt; ++k)
          RETURN_IF_ERROR(claim((*r.block_table)[k]));
        fused_[i] = *fused;
        fused_seqs_.insert(r.seq_id);
      }
      verify_seqs_.push_back(q);
      verify_ids_.insert(verify_ids_.end(), r.tokens, r.tokens + r.num_tokens);
      verify_counts_.push_back(prefix + r.num_tokens);
      verify_skip_.push_back(prefix);
    } else if (r.start_pos > 0 && r.num_tokens == 1 &&
               int64_t(decode_rows_.size()) < model_->max_decode_rows()) {
      decode_rows_.push_back(i);
      ASSIGN_OR_RETURN(PagedSequence q, drafting_sequence(r, 1, r.start_pos, 1));
      decode_seqs_.push_back(q);
      decode_ids_.push_back(r.tokens[0]);
    } else {
      prefill_rows_.push_back(i);
    }
  }
  return ok_status();
}

Status CudaRunner::execute(const StepBatch& batch, StepOutput* out) {
  RETURN_IF_ERROR(plan(batch));
  RETURN_IF_ERROR(roll_back(batch));
  // Replays this step needs and its rows do not carry run now, before the copies read any page;
  // others stay pending (a rollback-only step leaves them for the sequence's next row).
  for (uint64_t id : fused_seqs_) pending_.erase(id);
  RETURN_IF_ERROR(flush_replays([&](uint64_t id) { return must_flush(batch, id); }));
  if (!copy_from_.empty())
    RETURN_IF_ERROR(
        model_->copy_pages(copy_from_.data(), copy_to_.data(), int64_t(copy_from_.size())));

  const int64_t V = info_.vocab_size;
  const size_t n = batch.rows.size();
  out_row_.assign(n, -1);
  int64_t n_out = 0, decode_out = 0;
  bool decode_logits = false;  // a decode row needs its logits row, not just the argmax
  for (size_t i = 0; i < n; ++i) {
    const StepRow& r = batch.rows[i];
    if (r.wants_logits || r.speculative) out_row_[i] = n_out;
    n_out += r.speculative ? r.num_tokens : r.wants_logits ? 1 : 0;
    // A row that no rollback cut was accepted whole: its snapshot is done with. A speculative
    // row takes a new one before any row runs (the copies above are in the pages it saves).
    auto it = speculated_.find(r.seq_id);
    if (it != speculated_.end()) it->second.held = false;
    if (!fused_[i].tokens.empty()) {
      // Its pages are the snapshot the rollback restored (at the replay's start, untouched by
      // this step's copies): kept, it covers the replay and the row without reading them again.
      Speculated& h = speculated_.at(r.seq_id);
      h.start_pos = fused_[i].start;
      h.tokens = fused_[i].tokens;
      h.tokens.insert(h.tokens.end(), r.tokens, r.tokens + r.num_tokens);
      h.held = true;
    } else if (r.speculative) {
      RETURN_IF_ERROR(snapshot(r));
    }
  }
  for (size_t i : decode_rows_) {
    const StepRow& r = batch.rows[i];
    decode_out += r.wants_logits ? 1 : 0;
    decode_logits = decode_logits || (r.wants_logits && !r.argmax_only);
  }
  out->num_logit_rows = n_out;
  argmax_.assign(size_t(n_out), -1);
  out->argmax = argmax_.data();

  // A step of decode rows only, all sampling from logits (the steady state without greedy
  // rows): decode's rows are the output rows, in order, so they land in place. Greedy-only
  // decode rows bring back their argmax alone.
  const bool in_place = prefill_rows_.empty() && verify_rows_.empty() && decode_logits &&
                        decode_out == static_cast<int64_t>(decode_rows_.size());
  const int64_t staged = in_place || !decode_logits ? 0 : int64_t(decode_rows_.size());
  ASSIGN_OR_RETURN(float* host, logits_.reserve(size_t(std::max<int64_t>(n_out + staged, 1)) * V));
  out->logits = host;
  if (!decode_rows_.empty()) {
    float* dst = in_place ? host : (decode_logits ? host + n_out * V : nullptr);
    RETURN_IF_ERROR(model_->decode_paged(decode_seqs_.data(), decode_ids_.data(),
                                         static_cast<int64_t>(decode_seqs_.size()), dst,
                                         &decode_argmax_));
    for (size_t b = 0; b < decode_rows_.size(); ++b) {
      const int64_t k = out_row_[decode_rows_[b]];
      if (k < 0) continue;
      argmax_[k] = decode_argmax_[b];
      if (decode_logits && !in_place)
        std::memcpy(host + k * V, host + (n_out + b) * V, V * sizeof(float));
    }
  }
  if (!verify_rows_.empty()) {  // every position's logits, straight into its output rows
    verify_out_.clear();
    for (size_t i : verify_rows_) verify_out_.push_back(host + out_row_[i] * V);
    RETURN_IF_ERROR(model_->verify_paged(verify_seqs_.data(), verify_ids_.data(),
                                         verify_counts_.data(), int64_t(verify_seqs_.size()),
                                         verify_out_.data(), verify_skip_.data()));
  }
  for (size_t i : prefill_rows_) {
    const StepRow& r = batch.rows[i];
    const int64_t k = out_row_[i];
    const bool argmax_only = k >= 0 && r.argmax_only;
    ASSIGN_OR_RETURN(PagedSequence q, drafting_sequence(r, 1, r.start_pos, r.num_tokens));
    row_snapshots_.clear();
    for (const runtime::RowSnapshot& sn : r.snapshots)
      row_snapshots_.push_back({sn.end_pos, sn.pages->data()});
    q.snapshots = row_snapshots_.data();
    q.num_snapshots = int64_t(row_snapshots_.size());
    RETURN_IF_ERROR(model_->forward_paged(q, r.tokens, r.num_tokens,
                                          /*all_logits=*/false,
                                          k >= 0 && !argmax_only ? host + k * V : nullptr,
                                          argmax_only ? &argmax_[k] : nullptr, r.keep_from_pos));
  }
  for (size_t i = 0; i < n; ++i)
    RETURN_IF_ERROR(note_row(batch.rows[i], int64_t(fused_[i].tokens.size())));
  return ok_status();
}

StatusOr<std::string> CudaRunner::read_pages(const std::vector<int32_t>& pages) {
  RETURN_IF_ERROR(flush_replays());  // the pages as the rollbacks left them
  std::string bytes(pages.size() * static_cast<size_t>(spec_.page_bytes), '\0');
  RETURN_IF_ERROR(model_->read_pages(pages.data(), int64_t(pages.size()), bytes.data()));
  return bytes;
}

Status CudaRunner::write_pages(const std::vector<int32_t>& pages, std::string_view bytes) {
  RETURN_IF_ERROR(check_page_bytes("write_pages", pages, int64_t(bytes.size())));
  RETURN_IF_ERROR(flush_replays());
  return model_->write_pages(pages.data(), int64_t(pages.size()), bytes.data());
}

StatusOr<std::string> device_name() {
  int device = 0;
  cudaDeviceProp prop{};
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess)
    return internal_error(std::string("cudaGetDeviceProperties failed: ") + cudaGetErrorString(e));
  return std::string(prop.name);
}

}  // namespace

StatusOr<std::unique_ptr<ModelRunner>> create_cuda_runner(const RunnerOptions& o) {
  if (o.numerics == Numerics::kOfficial)
    return unimplemented(
        "--numerics official on --device cuda: the GPU forward computes plain numerics only "
        "(transformers' math, without the official reference's simulated FP8/FP4 activation "
        "quantization); use --numerics plain or auto");
  if (!(o.gpu_memory_utilization > 0 && o.gpu_memory_utilization <= 1))
    return invalid_argument("--gpu-memory-utilization " + std::to_string(o.gpu_memory_utilization) +
                            " is outside (0, 1]");
  if (o.max_model_len < 1 || o.max_model_len > CudaModel::max_supported_tokens())
    return invalid_argument("--max-model-len " + std::to_string(o.max_model_len) +
                            ": the CUDA forward serves 1 to " +
                            std::to_string(CudaModel::max_supported_tokens()) +
                            " tokens per sequence (the indexer's top-k capacity)");
  if (o.max_num_seqs < 1) return invalid_argument("--max-num-seqs must be positive");
  if (o.kv_memory_bytes < 0) return invalid_argument("--kv-memory must not be negative");
  if (o.max_num_batched_tokens < 1)
    return invalid_argument("--max-num-batched-tokens must be positive");

  CudaModelOptions mo;  // plain numerics (its default)
  mo.max_tokens = o.max_model_len;
  // Decode steps every running sequence as one batch, and its buckets stop at max_chunk.
  mo.max_chunk = std::max<int64_t>(std::min(o.max_num_batched_tokens, kMaxChunk), o.max_num_seqs);
  mo.max_sequences = o.max_num_seqs;
  mo.page_tokens = kPageTokens;
  mo.memory_fraction = o.gpu_memory_utilization;
  mo.pool_bytes = std::max<int64_t>(o.kv_memory_bytes, 0);
  mo.cuda_graphs = o.cuda_graphs;
  mo.batch_invariant = o.batch_invariant;
  mo.drafting = o.drafting;
  if (o.on_load_progress)
    mo.progress = [cb = o.on_load_progress](const v4::LoadProgress& p) {
      cb(p.tensors_done, p.tensors_total, p.bytes_done, p.bytes_total);
    };
  // config.json's model_type picks the family's GPU forward.
  std::string config_path;
  ASSIGN_OR_RETURN(std::string config_text,
                   model_config::read_config_file(o.model_dir, &config_path));
  ASSIGN_OR_RETURN(ModelFamily family, model_family_from_config_json(config_text, config_path));
  StatusOr<std::unique_ptr<PagedForward>> loaded =
      [&]() -> StatusOr<std::unique_ptr<PagedForward>> {
    if (family == ModelFamily::kDeepseekV41) {
      ASSIGN_OR_RETURN(v41::Config config, v41::parse_config_json(config_text, config_path));
      const int64_t serves = CudaV41Model::max_supported_tokens(config);
      if (o.max_model_len_defaulted && mo.max_tokens > serves) {
        std::fprintf(stderr,
                     "deepinfer: --max-model-len defaults to %lld for %s on the GPU (the "
                     "indexer's top-k capacity at the smallest compress ratio)\n",
                     static_cast<long long>(serves), o.model_dir.c_str());
        mo.max_tokens = serves;
      }
      ASSIGN_OR_RETURN(std::unique_ptr<CudaV41Model> m, CudaV41Model::load(o.model_dir, mo));
      return std::unique_ptr<PagedForward>(std::move(m));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<CudaModel> m, CudaModel::load(o.model_dir, mo));
    return std::unique_ptr<PagedForward>(std::move(m));
  }();
  if (!loaded.ok()) {
    const Status& st = loaded.status();
    if (st.message().rfind("max_tokens ", 0) == 0)  // the family's own capacity
      return Status(st.code(), "--max-model-len: " + st.message());
    if (st.code() != StatusCode::kResourceExhausted) return st;
    char flag[64];
    if (o.kv_memory_bytes > 0)
      std::snprintf(flag, sizeof flag, "--kv-memory %lld",
                    static_cast<long long>(o.kv_memory_bytes));
    else
      std::snprintf(flag, sizeof flag, "--gpu-memory-utilization %g", o.gpu_memory_utilization);
    return Status(st.code(), std::string(flag) + ": " + st.message() +
                                 "; raise it, or lower --max-model-len (the pool must hold one "
                                 "sequence of that many tokens)");
  }
  std::unique_ptr<PagedForward> model = std::move(*loaded);
  ASSIGN_OR_RETURN(std::string name, device_name());

  ModelInfo info;
  info.model_type = model_family_name(family);
  info.vocab_size = model->vocab_size();
  info.eos_token_id = static_cast<int32_t>(model->eos_token_id());
  info.numerics = "plain";
  info.device = Device::kCuda;
  info.device_name = name;
  info.weight_bytes = model->weight_bytes();
  info.max_sequences = 0;  // the pool bounds it; decode rows past max_decode_rows() prefill
  if (mo.max_tokens < o.max_model_len) info.max_model_len = mo.max_tokens;
  kv::PageSpec spec;
  spec.page_tokens = model->page_tokens();
  spec.page_bytes = model->page_bytes();
  spec.constant_pages_per_seq = model->constant_pages();
  spec.num_pages = model->num_pages();
  const int64_t per_seq_max = spec.constant_pages_per_seq + spec.pages_for_tokens(mo.max_tokens);
  std::fprintf(
      stderr,
      "deepinfer: cuda runner on %s: weights %s; KV pool %s = %lld pages of %d tokens "
      "(%s each, %lld constant per sequence): %lld tokens, %lld sequences of "
      "--max-model-len %lld; decode batches up to %lld sequences\n",
      name.c_str(), bytes_text(info.weight_bytes).c_str(),
      bytes_text(spec.page_bytes * spec.num_pages).c_str(), static_cast<long long>(spec.num_pages),
      spec.page_tokens, bytes_text(spec.page_bytes).c_str(),
      static_cast<long long>(spec.constant_pages_per_seq),
      static_cast<long long>((spec.num_pages - spec.constant_pages_per_seq) * spec.page_tokens),
      static_cast<long long>(spec.num_pages / per_seq_max), static_cast<long long>(mo.max_tokens),
      static_cast<long long>(model->max_decode_rows()));
  return std::unique_ptr<ModelRunner>(
      new CudaRunner(std::move(model), std::move(info), spec, mo.max_tokens, mo.max_chunk));
}

}  // namespace deepinfer::runtime::cuda

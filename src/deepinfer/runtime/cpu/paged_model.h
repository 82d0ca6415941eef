// What the CPU runner needs of a model family, and nothing of its math: the page geometry of its
// state layout, sequences bound to pages (fresh, or adopted from pages that already hold state),
// and a forward over one sequence. `PagedModelOf` adapts a family's CpuModel (deepseek_v4 or
// deepseek_v41: the same forward, make_sequence_state and adopt_sequence_state shapes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/state_pages.h"
#include "deepinfer/model/deepseek_v41/dspark.h"
#include "deepinfer/runtime/model_runner.h"

namespace deepinfer::runtime::cpu {

// One sequence's state over its pages; only the PagedModel that made it can run it.
class PagedSequence {
 public:
  virtual ~PagedSequence() = default;
  virtual int64_t num_tokens() const = 0;
};

class PagedModel {
 public:
  virtual ~PagedModel() = default;
  // vocab_size, eos_token_id, numerics and weight_bytes; the runner fills in the device.
  virtual const ModelInfo& info() const = 0;
  virtual int page_tokens() const = 0;
  virtual int64_t page_floats() const = 0;
  virtual int64_t constant_pages() const = 0;
  // start_pos 0: a fresh state (constant rows initialized, whatever the pages held); otherwise
  // the pages hold start_pos tokens of state (a fork's copies, page I/O) and are adopted.
  virtual std::unique_ptr<PagedSequence> start(std::unique_ptr<v4::StatePages> pages,
                                               int64_t start_pos) const = 0;
  // Appends ids[0..n) to the sequence; `logits` gets the last position's row, or every
  // position's with all_logits (NaN rows before keep_from_pos, StepRow's YOCO bound). taps, when
  // not null and the model has dspark(), gets the drafter's input rows (v41::CpuModel::forward).
  virtual Status forward(PagedSequence& seq, const int32_t* ids, int64_t n, int64_t keep_from_pos,
                         bool all_logits, std::vector<float>* logits,
                         std::vector<float>* taps) const = 0;
  // V4.1's DSpark drafter, when the runner drafts (RunnerOptions::drafting) and the checkpoint
  // holds its weights; its state lives beside the pages (dspark_track.h). Null otherwise: V4
  // drafts through mtp_draft, from its pages.
  virtual const v41::DsparkDrafter* dspark() const { return nullptr; }
  // Up to k greedy drafts from the MTP layer after `token` (just sampled for position
  // seq.num_tokens()), from the last forward's final hidden state, chained through the MTP
  // layer's own output; it writes the MTP layer's own ring (constant state) and nothing else.
  // unimplemented for a family or checkpoint without one (the message says why).
  virtual Status mtp_draft(PagedSequence& seq, int32_t token, int64_t k,
                           std::vector<int32_t>* drafts) const = 0;
  // Expert parallelism: this rank's part in one forward of another rank (no rows of its own).
  virtual Status expert_parallel_idle() const = 0;
  // The model's routed picks per main layer per expert (thread-safe).
  virtual std::vector<std::vector<uint64_t>> routed_counts() const = 0;
};

// Reads config.json's model_type and loads that family's CPU model over layouts of page_tokens
// tokens. Numerics: deepseek_v4 kAuto is official; deepseek_v41 has only plain (kAuto is plain,
// kOfficial is unimplemented, named by --numerics).
StatusOr<std::unique_ptr<PagedModel>> load_paged_model(const RunnerOptions& options,
                                                       int page_tokens);

// Model: a family's CpuModel; Layout its StateLayout; State its SequenceState. The family's
// make_sequence_state / adopt_sequence_state are found by argument-dependent lookup.
template <class Model, class Layout, class State>
class PagedModelOf final : public PagedModel {
 public:
  PagedModelOf(std::unique_ptr<Model> model, int page_tokens, ModelInfo info)
      : model_(std::move(model)),
        layout_(std::make_shared<const Layout>(model_->config(), page_tokens)),
        info_(std::move(info)) {}

  const ModelInfo& info() const override { return info_; }
  int page_tokens() const override { return layout_->page_tokens(); }
  int64_t page_floats() const override { return layout_->page_floats(); }
  int64_t constant_pages() const override { return layout_->constant_pages(); }

  std::unique_ptr<PagedSequence> start(std::unique_ptr<v4::StatePages> pages,
                                       int64_t start_pos) const override {
    return std::make_unique<Sequence>(
        start_pos == 0
            ? make_sequence_state(model_->config(), layout_, std::move(pages))
            : adopt_sequence_state(model_->config(), layout_, std::move(pages), start_pos));
  }

  Status forward(PagedSequence& seq, const int32_t* ids, int64_t n, int64_t keep_from_pos,
                 bool all_logits, std::vector<float>* logits,
                 std::vector<float>* taps) const override {
    State& st = static_cast<Sequence&>(seq).state;
    if constexpr (std::is_same_v<Model, v41::CpuModel>) {
      return model_->forward(st, ids, n, all_logits, logits, keep_from_pos,
                             dspark_ ? taps : nullptr);
    } else {
      return model_->forward(st, ids, n, all_logits, logits, keep_from_pos);
    }
  }

  const v41::DsparkDrafter* dspark() const override { return dspark_.get(); }
  // V4.1: the drafter (reading this model's weights), or why there is none.
  void set_dspark(std::unique_ptr<v41::DsparkDrafter> d, std::string why_not) {
    dspark_ = std::move(d);
    no_draft_ = std::move(why_not);
  }

  Status expert_parallel_idle() const override { return model_->expert_parallel_idle(); }
  std::vector<std::vector<uint64_t>> routed_counts() const override {
    return model_->routed_counts();
  }

  Status mtp_draft(PagedSequence& seq, int32_t token, int64_t k,
                   std::vector<int32_t>* drafts) const override {
    if constexpr (requires(State & st) { model_->mtp_draft(st, token, k, drafts); }) {
      if (model_->config().num_mtp_layers < 1)
        return unimplemented("this checkpoint has no MTP layer");
      return model_->mtp_draft(static_cast<Sequence&>(seq).state, token, k, drafts);
    } else {
      return unimplemented(no_draft_);
    }
  }

 private:
  struct Sequence final : PagedSequence {
    explicit Sequence(State s) : state(std::move(s)) {}
    int64_t num_tokens() const override { return state.num_tokens; }
    State state;
  };

  std::unique_ptr<Model> model_;
  std::shared_ptr<const Layout> layout_;
  ModelInfo info_;
  std::unique_ptr<v41::DsparkDrafter> dspark_;  // after model_: destroyed before it
  std::string no_draft_ = "this model family drafts with DSpark, not an MTP layer";
};

}  // namespace deepinfer::runtime::cpu

// The deepseek_v41 CPU reference model: load a checkpoint directory, then run any chunking of
// prefill and decode over a SequenceState. Logits are the same whatever the chunking.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/model_context.h"  // v4::Numerics
#include "deepinfer/model/deepseek_v4/weights.h"
#include "deepinfer/model/deepseek_v41/config.h"
#include "deepinfer/model/deepseek_v41/engram.h"
#include "deepinfer/model/deepseek_v41/model_context.h"
#include "deepinfer/model/deepseek_v41/sequence_state.h"
#include "deepinfer/model/deepseek_v41/yoco_rows.h"

namespace deepinfer::v41 {

struct ModelOptions {
  // Only plain exists for V4.1: transformers' fp32 forward, which already rounds the window KV,
  // the compressed KV and the indexer operands through FP8/FP4 (qat.h).
  v4::Numerics numerics = v4::Numerics::kPlain;
  // Expert parallelism (not owned, outlives the model): this rank loads only its share of the
  // main layers' routed experts (e % size == rank; the DSpark stages' stay whole) and every
  // forward is collective over the group (model/README.md). Null: one rank.
  Collective* expert_group = nullptr;
  // EPLB (model/eplb/): which rank holds which routed experts, replicas included. Null: e % size.
  std::shared_ptr<const ExpertPlacement> placement;
  // Expert parallelism: each MoE exchange runs as two micro-batches whose communication
  // overlaps the other's compute and the shared expert (docs/decisions/0015). Off: the serial
  // exchange, to measure against. The logits are the same bits either way; every rank of the
  // group must be given the same value.
  bool two_batch_overlap = true;

  // The defaults with only the numerics chosen. A function keeps this an aggregate; a brace list
  // naming only the first member draws GCC's -Wmissing-field-initializers.
  static ModelOptions with_numerics(v4::Numerics n) {
    ModelOptions o;
    o.numerics = n;
    return o;
  }
};

class CpuModel {
 public:
  // Reads config.json and the safetensors in `dir`, plus tokenizer.json when the model has Engram
  // layers. `progress` is called while the weights load.
  static StatusOr<std::unique_ptr<CpuModel>> load(
      const std::string& dir, const ModelOptions& options = {},
      const std::function<void(const v4::LoadProgress&)>& progress = {});
  // The same with dir's config.json already parsed (a caller that read it to pick the family:
  // the file is read once).
  static StatusOr<std::unique_ptr<CpuModel>> load(
      const std::string& dir, Config config, const ModelOptions& options = {},
      const std::function<void(const v4::LoadProgress&)>& progress = {});
  // ckpt stays mapped while the Engram tables read from it (may be null without Engram layers).
  CpuModel(Config config, v4::Weights weights, std::unique_ptr<Checkpoint> ckpt,
           std::optional<EngramTables> engram, const ModelOptions& options = {});

  const Config& config() const { return config_; }
  // The fp32 weights by canonical name (the DSpark drafter reads its own and embed/head here).
  const v4::Weights& weights() const { return weights_; }
  // Config, weights and RoPE tables as the sub-layers read them (shared with the drafter).
  const ModelContext& context() const { return ctx_; }
  // Whether the checkpoint held the DSpark draft tensors (dspark.h runs them).
  bool has_draft_weights() const { return weights_.has("mtp.0.main_proj.weight"); }
  int64_t weight_bytes() const { return weights_.bytes(); }
  SequenceState new_sequence() const { return make_sequence_state(config_); }
  // Routed picks of this model's forwards so far, per main layer per expert (EPLB's input).
  RoutingCounts routed_counts() const { return routed_counts_.snapshot(); }

  // Appends ids[0..n) at positions state.num_tokens... . logits gets n x vocab rows
  // (all_logits) or the last position's row only. Positions before keep_from_pos get no logits
  // (NaN rows), and the layers after the last one with cached state compute only what later
  // positions and steps read (YOCO compact, yoco_rows.h); with taps only the last layer's MoE
  // is trimmed (the taps need every row).
  // taps, when given, gets the DSpark drafter's input: n rows of the mean over the hc streams of
  // each dspark_target_layer_ids layer's input (after its Engram), concatenated in that order
  // (n x taps x hidden). It changes nothing else.
  // Expert parallelism: this rank's part in one forward of the others when it has no rows to
  // run itself (every layer's MoE with no tokens), so the group's calls stay matched.
  Status expert_parallel_idle() const;

  Status forward(SequenceState& state, const int32_t* ids, int64_t n, bool all_logits,
                 std::vector<float>* logits, int64_t keep_from_pos = 0,
                 std::vector<float>* taps = nullptr) const;

 private:
  // Deferred mHC (spec §11.2.1): a site collapses its input with the previous site's `pre` and
  // hands its own on. `pre` holds n x hc_mult coefficients.
  // The sub-layers run for the rows `rows` gives (YOCO, yoco_rows.h).
  Status block_forward(int layer, float* X, float* pre, int64_t n, int64_t pos0, SequenceState& st,
                       ForwardShared& shared, LayerRows rows) const;

  Config config_;
  v4::Weights weights_;
  std::unique_ptr<Checkpoint> ckpt_;  // mapped for the Engram tables (declared before them)
  std::optional<EngramTables> engram_;
  std::shared_ptr<const ExpertPlacement> placement_;
  RoutedCounts routed_counts_;
  ModelContext ctx_;
};

}  // namespace deepinfer::v41

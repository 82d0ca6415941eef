// The deepseek_v4 CPU reference model: load a checkpoint directory, then run any chunking of
// prefill and decode over a SequenceState. Logits are identical whatever the chunking.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/config.h"
#include "deepinfer/model/deepseek_v4/model_context.h"
#include "deepinfer/model/deepseek_v4/sequence_state.h"
#include "deepinfer/model/deepseek_v4/weights.h"

namespace deepinfer::v4 {

struct ModelOptions {
  Numerics numerics = Numerics::kOfficial;
  // The released reference leaves the shared expert unclamped, transformers clamps it (spec
  // §10). Unset: clamp in plain numerics, not in official.
  std::optional<bool> clamp_shared_expert;
  // Expert parallelism (expert_parallel_moe.h; not owned, outlives the model): this rank loads
  // only its share of the main layers' routed experts, and every forward is collective over the
  // group (each rank forwards its own sequences, the same number of calls on every rank). MTP
  // keeps all its experts. Null: one rank.
  Collective* expert_group = nullptr;
  // EPLB (model/eplb/): which rank holds which routed experts, replicas included; it must fit
  // the config and the group (check_placement_fits). Null: e % size.
  std::shared_ptr<const ExpertPlacement> placement;
  // Expert parallelism: each MoE exchange runs as two micro-batches whose communication
  // overlaps the other's compute and the shared expert (docs/decisions/0015). Off: the serial
  // exchange, to measure against. The logits are the same bits either way; every rank of the
  // group must be given the same value.
  bool two_batch_overlap = true;

  // The defaults with only the numerics chosen. A function keeps this an aggregate; a brace list
  // naming only the first member draws GCC's -Wmissing-field-initializers.
  static ModelOptions with_numerics(Numerics n) {
    ModelOptions o;
    o.numerics = n;
    return o;
  }
};

StatusOr<Numerics> parse_numerics(const std::string& s);  // "plain" | "official"

class CpuModel {
 public:
  static StatusOr<std::unique_ptr<CpuModel>> load(
      const std::string& dir, const ModelOptions& options,
      const std::function<void(const LoadProgress&)>& progress = {});
  // The same with dir's config.json already parsed (a caller that read it to pick the family:
  // the file is read once).
  static StatusOr<std::unique_ptr<CpuModel>> load(
      const std::string& dir, Config config, const ModelOptions& options,
      const std::function<void(const LoadProgress&)>& progress = {});
  CpuModel(Config config, Weights weights, const ModelOptions& options);

  const Config& config() const { return config_; }
  int64_t weight_bytes() const { return weights_.bytes(); }
  // A standalone state in heap pages, laid out once per model.
  SequenceState new_sequence() const { return make_sequence_state(config_, layout_); }

  // Appends ids[0..n) at positions state.num_tokens... . logits gets n x vocab rows
  // (all_logits) or the last position's row only. YOCO truncation: positions before
  // keep_from_pos skip the final layer's MoE and the head (they feed no cached state); their
  // logits rows are NaN, and last_hidden (the MTP input) is kept only when the last position
  // was computed in full. The other positions' logits are bitwise those of a full forward.
  Status forward(SequenceState& state, const int32_t* ids, int64_t n, bool all_logits,
                 std::vector<float>* logits, int64_t keep_from_pos = 0) const;

  // Expert parallelism: this rank's part in one forward of the others when it has no rows to
  // run itself (every main layer's MoE with no tokens), so the group's calls stay matched.
  Status expert_parallel_idle() const;
  // Routed picks of this model's forwards so far, per main layer per expert (EPLB's input).
  RoutingCounts routed_counts() const { return routed_counts_.snapshot(); }

  // MTP draft (spec §6.10): `token` is the one just sampled for position state.num_tokens; the
  // draft layer combines it with the final streams of the last processed token and returns
  // logits for position num_tokens + 1. It advances only the MTP layer's own ring, which is fed
  // by these calls alone (a speculative decoder must also run it over the prompt).
  Status mtp_forward(SequenceState& state, int32_t token, std::vector<float>* logits) const;
  // Up to k greedy MTP drafts after `token`, chained: draft j + 1 feeds the MTP layer's own output
  // streams of draft j back with draft j's token, one position further on (DeepSeek's
  // autoregressive MTP). Writes the MTP ring at positions num_tokens .. num_tokens + k - 1.
  Status mtp_draft(SequenceState& state, int32_t token, int64_t k,
                   std::vector<int32_t>* drafts) const;

 private:
  // One MTP position: `hidden` (hc_mult x hidden streams) and `token`'s embedding at `pos`;
  // leaves the layer's output streams in *X and its logits in *logits.
  Status mtp_step(SequenceState& state, const float* hidden, int32_t token, int64_t pos,
                  std::vector<float>* X, std::vector<float>* logits) const;
  // The FFN sublayer runs for rows [ffn_from, n) only (YOCO); the attention for all n.
  Status block_forward(const std::string& prefix, int ratio, bool hash, float* X,
                       const int32_t* ids, int64_t n, int64_t pos0, LayerState& st,
                       int64_t ffn_from = 0) const;
  void head_forward(const std::string& hc_prefix, const std::string& norm, const float* X,
                    float* logits) const;

  Config config_;
  Weights weights_;
  std::shared_ptr<const ExpertPlacement> placement_;
  RoutedCounts routed_counts_;
  ModelContext ctx_;
  std::shared_ptr<const StateLayout> layout_;
};

}  // namespace deepinfer::v4

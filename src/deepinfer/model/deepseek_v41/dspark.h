// The DSpark drafter of DeepSeek-V4.1 (spec §11.2.9) on the CPU in fp32: num_nextn_predict_layers
// stages ("mtp.{s}.", V4.1 blocks with their own MoE) that turn the target's tap-layer hidden
// states and one anchor token into dspark_block_size draft tokens in one parallel pass, then a
// rank-markov_rank previous-token bias picks them greedily in order, and a confidence head rates
// each. Semantics from DeepSeek's DeepSpec (modeling/dspark) and two ports of V4.1's inference
// code (README "DSpark drafter"); there are no reference logits to hold it to.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v41/model_context.h"

namespace deepinfer::v41 {

class CpuModel;

// What the drafter keeps of one sequence: per stage the window K=V of the context rows it
// absorbed (sliding_window rows of head_dim; position p at row p % window). Heap-backed.
struct DsparkState {
  int64_t num_tokens = 0;  // context positions absorbed; the anchor sits at this position
  std::vector<std::vector<float>> rings;
};

struct DsparkProposal {
  // Greedy drafts for positions num_tokens + 1 ... num_tokens + block_size (the anchor's row
  // drafts the first), ties to the lower id.
  std::vector<int32_t> tokens;
  // Per draft: sigmoid of the confidence head, the predicted chance that it is accepted given
  // that the drafts before it were; in [0, 1].
  std::vector<float> confidence;
  // block_size x vocab: the draft logits with the Markov bias each token was picked from.
  std::vector<float> logits;
};

// The last step as weights and rows, so it can be checked by hand: x [rows, hidden] are the
// collapsed streams (before the final norm). Row i: logits = head(norm(x_i)) +
// markov_head · markov_embed[prev], token = argmax, confidence = sigmoid(confidence_proj ·
// [x_i, markov_embed[prev]]); prev starts at the anchor and then is the token just drafted.
struct DsparkHeadWeights {
  const float* norm = nullptr;             // [hidden]
  const float* head = nullptr;             // [vocab, hidden]
  const float* markov_embed = nullptr;     // [vocab, rank]
  const float* markov_head = nullptr;      // [vocab, rank]
  const float* confidence_proj = nullptr;  // [hidden + rank]
  int64_t hidden = 0, vocab = 0;
  int rank = 0;
  float eps = 0;
};
void dspark_draft_tokens(const DsparkHeadWeights& w, const float* x, int rows, int32_t anchor,
                         DsparkProposal* out);

class DsparkDrafter {
 public:
  // The drafter of a target loaded with its draft weights (CpuModel::has_draft_weights). Reads the
  // target's weights in place: the target must outlive it. Errors name the config field or the
  // missing weights.
  static StatusOr<std::unique_ptr<DsparkDrafter>> create(const CpuModel& target);

  int block_size() const { return m_.c.dspark.block_size; }
  // Absorbed positions a proposal reads (sliding_window): the state's rows older than that are
  // never read again.
  int64_t window() const { return m_.c.sliding_window; }
  // Floats per context row of taps (CpuModel::forward's `taps`): taps x hidden.
  int64_t tap_width() const;
  DsparkState new_state() const;

  // Appends n context rows at positions state.num_tokens...: each stage's window K=V of
  // main_norm(main_proj(taps)). Row t of taps is the target's taps at that position; give only
  // positions the target has committed (a verified draft's rows), in order, any chunking.
  Status absorb(DsparkState& state, const float* taps, int64_t n) const;

  // Drafts block_size tokens after `anchor`, the token at position state.num_tokens (the target's
  // pick after the absorbed context). The block [anchor, noise...] at positions num_tokens... runs
  // through the stages; each block row attends its stage's window of absorbed rows (the last
  // sliding_window positions) and every block row. The state is not changed.
  Status propose(const DsparkState& state, int32_t anchor, DsparkProposal* out) const;

  explicit DsparkDrafter(const ModelContext& m) : m_(m) {}

 private:
  void stage_attention(int stage, const DsparkState& state, const float* y, float* out) const;

  const ModelContext& m_;  // the target's
};

}  // namespace deepinfer::v41

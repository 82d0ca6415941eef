// The physical floor of one forward step of a deepseek_v4 checkpoint on one GPU, from what the
// step must read and compute at best: weights as stored in the checkpoint (FP8, MXFP4, BF16),
// attention state as bf16, every matmul and attention product counted once. Time floor =
// max(bytes / bandwidth, FLOPs / peak). It ignores what an engine adds (our bf16 experts, fp32
// state), so measured / floor is the whole distance to the hardware.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/config.h"

namespace deepinfer::cli {

// Bytes of a stored attention-state element: bf16 KV, compressed entries and indexer keys.
inline constexpr double kStateBytes = 2;

struct Hardware {
  double bytes_per_s = 4.3e12;  // H200 HBM3e
  double flops_per_s = 800e12;  // dense bf16 tensor-core rate the floor is held to
};

struct StepFloor {
  double weight_bytes = 0, state_bytes = 0, flops = 0;
  double seconds(const Hardware& hw) const;
};

// Expected distinct experts of E (K per token, uniform routing) that `tokens` tokens touch.
double experts_touched(double experts, double per_token, double tokens);

// A checkpoint's weights as a step reads them, either family.
struct WeightTally {
  double dense_bytes = 0;      // everything read once per step, embedding and experts aside
  double embed_row_bytes = 0;  // one embedding row
  double expert_bytes = 0;     // one routed expert (w1, w2, w3 + scales), per layer
  double dense_params = 0;     // matmul weights every token multiplies (head aside)
  double expert_params = 0;    // one routed expert's matmul weights
  double head_params = 0;      // vocab x hidden
  // One stored tensor (a quantized one with its scale); call after every tensor, then finish().
  void add(const std::string& name, double bytes, double params, bool matrix);
  void finish(int64_t vocab, int routed_experts);

 private:
  double expert_bytes_all_ = 0, expert_params_all_ = 0;
  int moe_layers_ = 0;
};

// The model shape a step floor needs besides the weights: per layer, one query's attention
// FLOPs and state bytes at a position, and the state a prefill writes per token.
struct StepShape {
  int num_layers = 0;
  double routed_experts = 0, experts_per_token = 0;
  double extra_token_bytes = 0;  // read per token besides its embedding row (V4.1's Engram rows)
  std::function<void(int layer, int64_t pos, double* flops, double* bytes)> attention;
  std::function<double(int layer)> written_per_token;  // state elements
};
StepFloor decode_floor(const WeightTally& w, const StepShape& s, int64_t batch, int64_t context);
StepFloor prefill_floor(const WeightTally& w, const StepShape& s, int64_t tokens);

class Roofline {
 public:
  // Reads the stored size of every tensor (headers only); the MTP layer is left out, as the
  // forward does not run it.
  static StatusOr<Roofline> open(const std::string& dir, const v4::Config& c);

  // One decode step of `batch` sequences, each with `context` tokens before the new one.
  StepFloor decode(int64_t batch, int64_t context) const;
  // A prompt of `tokens` tokens into an empty sequence, logits for the last position only.
  StepFloor prefill(int64_t tokens) const;

 private:
  // Attention and indexer FLOPs and state bytes of one query at position `pos` in layer l.
  void attention(int l, int64_t pos, double* flops, double* bytes) const;

  StepShape shape() const;

  v4::Config c_;
  WeightTally w_;
};

}  // namespace deepinfer::cli

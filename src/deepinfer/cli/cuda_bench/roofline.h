// The physical floor of one forward step of a deepseek_v4 checkpoint on one GPU, from what the
// step must read and compute at best: weights as stored in the checkpoint (FP8, MXFP4, BF16),
// attention state as bf16, every matmul and attention product counted once. Time floor =
// max(bytes / bandwidth, FLOPs / peak). It ignores what an engine adds (our bf16 experts, fp32
// state), so measured / floor is the whole distance to the hardware.
#pragma once

#include <cstdint>
#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/config.h"

namespace deepinfer::cli {

struct Hardware {
  double bytes_per_s = 4.3e12;  // H200 HBM3e
  double flops_per_s = 800e12;  // dense bf16 tensor-core rate the floor is held to
};

struct StepFloor {
  double weight_bytes = 0, state_bytes = 0, flops = 0;
  double seconds(const Hardware& hw) const;
};

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
  // Expected distinct routed experts of one layer that `tokens` tokens touch (uniform routing).
  double experts_touched(double tokens) const;
  // Attention and indexer FLOPs and state bytes of one query at position `pos` in layer l.
  void attention(int l, int64_t pos, double* flops, double* bytes) const;

  v4::Config c_;
  double dense_bytes_ = 0;      // everything read once per step, embedding and experts aside
  double embed_row_bytes_ = 0;  // one embedding row
  double expert_bytes_ = 0;     // one routed expert (w1, w2, w3 + scales), per layer
  double dense_params_ = 0;     // matmul weights every token multiplies (head aside)
  double expert_params_ = 0;    // one routed expert's matmul weights
  double head_params_ = 0;      // vocab x hidden
};

}  // namespace deepinfer::cli

// The physical floor of one forward step of a deepseek_v41 checkpoint on one GPU, as roofline.h
// for deepseek_v4: weights as stored (FP8 32x32 blocks, MXFP4 experts), attention state as bf16,
// every product counted once. Per layer role (spec §11.2): the window, then for a compressed
// layer its source's entries, top-k selected (index_topk); an index source (or reindex layer)
// scores the visible indexer keys, or only the level-1 candidates when it uses the candidate
// source's blocks; reuse layers score nothing. Engram reads its n-gram rows (FP8) once per token;
// they live in host memory, but the floor counts them at the device's bandwidth (a lower bound).
// The DSpark draft layers are left out, as the target forward does not run them.
#pragma once

#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/cli/cuda_bench/roofline.h"
#include "deepinfer/model/deepseek_v41/config.h"

namespace deepinfer::cli {

class RooflineV41 {
 public:
  // Reads the stored size of every tensor (headers only).
  static StatusOr<RooflineV41> open(const std::string& dir, const v41::Config& c);

  // One decode step of `batch` sequences, each with `context` tokens before the new one.
  StepFloor decode(int64_t batch, int64_t context) const;
  // A prompt of `tokens` tokens into an empty sequence, logits for the last position only.
  StepFloor prefill(int64_t tokens) const;

 private:
  // Attention and indexer FLOPs and state bytes of one query at position `pos` in layer l.
  void attention(int l, int64_t pos, double* flops, double* bytes) const;

  StepShape shape() const;

  v41::Config c_;
  WeightTally w_;  // the Engram tables aside
};

}  // namespace deepinfer::cli

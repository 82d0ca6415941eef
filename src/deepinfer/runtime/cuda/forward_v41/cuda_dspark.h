// The DSpark drafter of deepseek_v41 on the GPU (spec §11.2.9): model/deepseek_v41/dspark.h's
// absorb and propose over device buffers, with the backbone's kernels. Each stage is a V4.1 block
// (deferred mHC, its own MoE) whose attention sees the stage's window of absorbed rows and every
// row of the block (not causal); the sink-attention kernel takes that as a batched-decode launch
// where every block row sits at the window's last position (its key given as the row's own) and
// attends the block's keys as compressed entries. The Markov head then picks the drafts one after
// another on the device, and the confidence head rates each.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v41/config.h"
#include "deepinfer/model/deepseek_v41/dspark.h"
#include "deepinfer/runtime/cuda/forward/device_weights.h"
#include "deepinfer/runtime/cuda/forward_v41/v41_forward.h"

namespace deepinfer::cuda::v41f {

struct DsparkStage {
  HcWeights hc_attn, hc_ffn;
  const float *attn_norm = nullptr, *ffn_norm = nullptr;
  V41Attention attn;
  MoeWeights ffn;
};

struct DsparkWeights {
  DeviceMatrix main_proj;  // [hidden, taps * hidden]
  const float* main_norm = nullptr;
  std::vector<DsparkStage> stages;
  // The last stage's head: norm, Markov embedding and head ([vocab, rank] each, fp32), the
  // confidence projection ([hidden + rank]).
  const float *norm = nullptr, *markov_embed = nullptr, *markov_head = nullptr;
  const float* confidence = nullptr;
};

// The drafter's tensors (uploaded by DeviceWeights::load with_drafter); aborts naming a missing
// one (the manifest was validated at load).
DsparkWeights resolve_dspark(const v41::Config& c, const DeviceWeights& w);

class CudaDspark {
 public:
  // Shares the target's GEMM runners, head and RoPE table; the target outlives it. max_rows: the
  // most taps rows one absorb takes.
  CudaDspark(const v41::Config& c, DsparkWeights w, const V41Head& head, Gemm& gemm, Linear& lin,
             MoeRunner& moe, const double* main_inv_freq, cudaStream_t stream);

  int block_size() const { return c_.dspark.block_size; }
  int64_t window() const { return c_.sliding_window; }  // absorbed rows a proposal reads
  int64_t tap_width() const;                            // floats per absorbed row: taps x hidden
  // Floats of one sequence's drafter state: every stage's window of head_dim K=V rows (position
  // p at row p % sliding_window). Zeroed by the caller for a new sequence.
  int64_t state_floats() const;

  // Appends n rows of taps (device [n, tap_width()]) at positions pos0...: each stage's window
  // K=V of main_norm(main_proj(taps)) into `rings` (device, state_floats()).
  Status absorb(float* rings, const float* taps, int64_t n, int64_t pos0);
  // block_size drafts after `anchor`, the token at position pos0 (the absorbed count, at least
  // 1): tokens, confidence and the biased logits to host memory in out.
  Status propose(const float* rings, int64_t pos0, int32_t anchor, v41::DsparkProposal* out);

 private:
  V41Context context(int64_t rows, const int64_t* positions) const;
  void stage_attention(int s, const float* rings, int64_t pos0, const float* y, float* out);

  const v41::Config& c_;
  DsparkWeights w_;
  const V41Head& head_;
  Gemm& gemm_;
  Linear& lin_;
  MoeRunner& moe_;
  const double* main_inv_freq_;
  cudaStream_t stream_;
  mutable V41Scratch x_;
  DeviceBuffer<float> X_, pre_, y_, post_, comb_, f_, xc_, logits_, last_, main_x_;
  DeviceBuffer<int32_t> ids_, selected_, num_selected_, tokens_;
  DeviceBuffer<float> confidence_;
  DeviceBuffer<int64_t> positions_, query_positions_;
  DeviceBuffer<int32_t> query_seq_;
  DeviceBuffer<const float*> ring_ptr_;
};

}  // namespace deepinfer::cuda::v41f

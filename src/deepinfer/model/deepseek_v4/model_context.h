// What every sub-layer of the CPU forward reads: config, weights, numerics switches, RoPE tables.
#pragma once

#include <string>
#include <vector>

#include "deepinfer/backend/collective.h"
#include "deepinfer/model/deepseek_v4/config.h"
#include "deepinfer/model/deepseek_v4/rope.h"
#include "deepinfer/model/deepseek_v4/sequence_state.h"
#include "deepinfer/model/deepseek_v4/weights.h"
#include "deepinfer/model/eplb/expert_placement.h"
#include "deepinfer/model/eplb/routed_counts.h"

namespace deepinfer::v4 {

// plain: what transformers computes. official: adds the reference's simulated quantization
// (spec §4): FP8 activations before FP8/FP4 linears, FP8 KV nope dims, Hadamard+FP4 indexer.
enum class Numerics { kPlain, kOfficial };

struct ModelContext {
  const Config& c;
  const Weights& w;
  Numerics numerics;
  bool clamp_shared_expert;
  RopeTable main_rope, compress_rope;
  // Expert parallelism (expert_parallel_moe.h): the group whose ranks own the main layers'
  // routed experts e with e % size == rank (or as `placement` says); null: every expert is here.
  Collective* expert_group = nullptr;
  const ExpertPlacement* placement = nullptr;   // EPLB's plan; null: e % size
  const RoutedCounts* routed_counts = nullptr;  // the main layers' picks are counted here
  // Two-batch overlap of the MoE exchange (ModelOptions::two_batch_overlap).
  bool two_batch_overlap = true;

  bool official() const { return numerics == Numerics::kOfficial; }
  const RopeTable& rope_for(int ratio) const { return ratio > 0 ? compress_rope : main_rope; }
  const float* f(const std::string& name) const { return w.f(name); }
};

// y[n x out] = W x for a weight the reference stores as FP8/FP4: in official numerics the
// activation rows are first rounded through FP8 (128-blocks, power-of-two scales).
void quantized_linear(const ModelContext& m, const float* w, int64_t out, int64_t in,
                      const float* x, int64_t n, float* y);

// Attention sub-layer (spec §6.5-6.7) for n tokens at positions state.num_tokens...; updates the
// layer's ring and compressors. `prefix` is "layers.N." or "mtp.0.".
void attention_forward(const ModelContext& m, const std::string& prefix, int ratio, const float* h,
                       int64_t n, int64_t pos0, LayerState& st, float* out);

// MoE routing of one token (spec §6.8): affinities sqrt(softplus(logits)), experts from the hash
// row when given, else the top K of affinity + bias (ties: the lower id); weights are the
// picked affinities * route_scale / their sum.
void route_token(const float* logits, const float* bias, const int32_t* hash_row, int E, int K,
                 float route_scale, int* idx, float* weights);

// MoE sub-layer (spec §6.8) for n tokens.
void moe_forward(const ModelContext& m, const std::string& prefix, bool hash, const float* h,
                 const int32_t* ids, int64_t n, float* out);
// One SwiGLU expert (weights under p) on one token h, added into acc[hidden] with its routing
// weight, exactly as moe_forward adds it.
void expert_into(const ModelContext& m, const std::string& p, int64_t inter, const float* h,
                 float weight, bool clamp, float* acc);

// Projects n tokens' hidden states h into a compressor's (kv, gate) and feeds them in order,
// emitting an entry whenever a window completes (spec §6.6). `is_indexer` selects the indexer's
// compressor (keys: Hadamard + FP4 in official numerics) instead of the main one (FP8 KV).
void compressor_forward(const ModelContext& m, const std::string& prefix, bool is_indexer,
                        CompressorState& s, const float* h, int64_t n, int64_t pos0);

}  // namespace deepinfer::v4

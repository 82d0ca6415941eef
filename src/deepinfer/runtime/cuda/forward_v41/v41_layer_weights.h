// Every deepseek_v41 block's device weight pointers, resolved by name once at load (the role
// schedule of v41::Config::layers decides which exist; the others stay null/empty).
#pragma once

#include <string>
#include <vector>

#include "deepinfer/model/deepseek_v41/config.h"
#include "deepinfer/runtime/cuda/forward/device_weights.h"
#include "deepinfer/runtime/cuda/forward/layer_weights.h"

namespace deepinfer::cuda::v41f {

struct V41Attention {
  DeviceMatrix wq_a, wq_b, wkv, wo_a, wo_b;
  const float *q_norm = nullptr, *kv_norm = nullptr, *sink = nullptr;
  // KV source: the compressor (wgate only at ratio > 1) and the indexer keys' projection.
  DeviceMatrix c_wkv, c_wgate, index_wk;
  const float *c_norm = nullptr, *index_k_norm = nullptr;
  // Index source (KV sources and re-index layers): the indexer query and head weights.
  DeviceMatrix index_wq_b, index_proj;
};

struct V41Engram {
  DeviceMatrix wkv;  // [(hc + 1) * hidden, n_cols * engram_head_dim]
  const float *q_weight = nullptr, *k_weight = nullptr;  // [hc, hidden]
};

struct V41Layer {
  HcWeights hc_attn, hc_ffn;
  const float *attn_norm = nullptr, *ffn_norm = nullptr;
  V41Attention attn;
  MoeWeights ffn;
  V41Engram engram;  // Engram layers only
};

struct V41Head {
  const float* embed = nullptr;
  const float* norm = nullptr;
  DeviceMatrix head;
};

// The attention every V4.1 block and DSpark stage has (`ap`: "layers.3.attn.", "mtp.0.attn."):
// projections, norms, sink; a source's compressor and indexer are the caller's.
V41Attention resolve_window_attention(const DeviceWeights& w, const std::string& ap);
std::vector<V41Layer> resolve_v41_layers(const v41::Config& c, const DeviceWeights& w);
V41Head resolve_v41_head(const DeviceWeights& w);

}  // namespace deepinfer::cuda::v41f

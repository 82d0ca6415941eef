// Every block's device weight pointers, resolved by name once at load so the per-token path
// builds no strings and does no map lookups. Members a layer type lacks stay null (a compressor
// only where compress_ratio > 0, the indexer only for CSA, bias or tid2eid by hash layer).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/moe/experts.h"
#include "deepinfer/model/deepseek_v4/config.h"
#include "deepinfer/runtime/cuda/forward/device_weights.h"

namespace deepinfer::cuda {

struct HcWeights {
  const float* fn = nullptr;
  const float* base = nullptr;
  const float* scale = nullptr;
};

struct CompressorWeights {
  DeviceMatrix wkv, wgate;
  const float* ape = nullptr;
  const float* norm = nullptr;
};

struct AttentionWeights {
  DeviceMatrix wq_a, wq_b, wkv, wo_a, wo_b;
  const float *q_norm = nullptr, *kv_norm = nullptr, *sink = nullptr;
  CompressorWeights compressor;         // ratio > 0
  DeviceMatrix index_wq_b, index_proj;  // CSA
  CompressorWeights index_compressor;   // CSA
};

struct MoeWeights {
  const float* gate = nullptr;       // fp32 router
  const float* bias = nullptr;       // biased top-k layers
  const int32_t* tid2eid = nullptr;  // hash layers
  std::vector<ExpertWeights> experts;
  DeviceBuffer<ExpertWeights> device_experts;        // the same matrices, for the grouped path
  MatrixFormat expert_format = MatrixFormat::kBf16;  // every routed expert's (checked at load)
  ExpertWeights shared;                              // all null without a shared expert
};

struct LayerWeights {
  HcWeights hc_attn, hc_ffn;
  const float *attn_norm = nullptr, *ffn_norm = nullptr;
  AttentionWeights attn;
  MoeWeights ffn;
};

// Outside the blocks: embedding, the hc_head mix, the final norm and the LM head.
struct HeadWeights {
  const float* embed = nullptr;
  HcWeights hc;
  const float* norm = nullptr;
  DeviceMatrix head;
};

// V4's MTP layer (spec §7): its block and what feeds it and reads it out.
struct MtpWeights {
  LayerWeights block;
  DeviceMatrix e_proj, h_proj;
  const float *enorm = nullptr, *hnorm = nullptr, *norm = nullptr;
  HcWeights hc_head;
};

// Aborts if a layer's routed experts are not all in one format (the grouped kernels take one).
std::vector<LayerWeights> resolve_layers(const v4::Config& c, const DeviceWeights& w);
// One block by tensor prefix ("layers.3.", "mtp.0."); `layer` names it in errors.
LayerWeights resolve_layer(const v4::Config& c, const DeviceWeights& w, const std::string& p,
                           int layer, int ratio, bool hash);
// Needs the mtp.* tensors uploaded (DeviceWeights::load with_mtp).
MtpWeights resolve_mtp(const v4::Config& c, const DeviceWeights& w);
HeadWeights resolve_head(const DeviceWeights& w);

// Pieces both families share. p is the tensor-name prefix ("layers.3.hc_attn", "layers.3.",
// "layers.3.ffn.shared_experts.").
HcWeights resolve_hc(const DeviceWeights& w, const std::string& p);
ExpertWeights resolve_expert(const DeviceWeights& w, const std::string& p);
// The routed experts (and the shared one when `shared`) of layer prefix p into f; aborts naming
// the layer if the routed experts mix formats.
void resolve_experts(const DeviceWeights& w, const std::string& p, int layer, int n_routed,
                     bool shared, MoeWeights* f);

}  // namespace deepinfer::cuda

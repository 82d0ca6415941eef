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
  const __nv_bfloat16* wkv = nullptr;
  const __nv_bfloat16* wgate = nullptr;
  const float* ape = nullptr;
  const float* norm = nullptr;
};

struct AttentionWeights {
  const __nv_bfloat16 *wq_a = nullptr, *wq_b = nullptr, *wkv = nullptr;
  const __nv_bfloat16 *wo_a = nullptr, *wo_b = nullptr;
  const float *q_norm = nullptr, *kv_norm = nullptr, *sink = nullptr;
  CompressorWeights compressor;                                      // ratio > 0
  const __nv_bfloat16 *index_wq_b = nullptr, *index_proj = nullptr;  // CSA
  CompressorWeights index_compressor;                                // CSA
};

struct MoeWeights {
  const float* gate = nullptr;       // fp32 router
  const float* bias = nullptr;       // biased top-k layers
  const int32_t* tid2eid = nullptr;  // hash layers
  std::vector<ExpertWeightsBf16> experts;
  DeviceBuffer<ExpertWeightsBf16> device_experts;  // the same pointers, for the grouped path
  ExpertWeightsBf16 shared;                        // all null without a shared expert
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
  const __nv_bfloat16* head = nullptr;
};

std::vector<LayerWeights> resolve_layers(const v4::Config& c, const DeviceWeights& w);
HeadWeights resolve_head(const DeviceWeights& w);

}  // namespace deepinfer::cuda

#include "deepinfer/runtime/cuda/forward/layer_weights.h"

#include <string>

namespace deepinfer::cuda {
namespace {

HcWeights hc(const DeviceWeights& w, const std::string& p) {
  return HcWeights{w.f(p + "_fn"), w.f(p + "_base"), w.f(p + "_scale")};
}

CompressorWeights compressor(const DeviceWeights& w, const std::string& p) {
  return CompressorWeights{w.bf16(p + "wkv.weight"), w.bf16(p + "wgate.weight"), w.f(p + "ape"),
                           w.f(p + "norm.weight")};
}

ExpertWeightsBf16 expert(const DeviceWeights& w, const std::string& p) {
  return ExpertWeightsBf16{w.bf16(p + "w1.weight"), w.bf16(p + "w3.weight"),
                           w.bf16(p + "w2.weight")};
}

}  // namespace

std::vector<LayerWeights> resolve_layers(const v4::Config& c, const DeviceWeights& w) {
  std::vector<LayerWeights> layers(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const int ratio = c.compress_ratio(l);
    LayerWeights& L = layers[l];
    L.hc_attn = hc(w, p + "hc_attn");
    L.hc_ffn = hc(w, p + "hc_ffn");
    L.attn_norm = w.f(p + "attn_norm.weight");
    L.ffn_norm = w.f(p + "ffn_norm.weight");

    AttentionWeights& a = L.attn;
    a.wq_a = w.bf16(p + "attn.wq_a.weight");
    a.q_norm = w.f(p + "attn.q_norm.weight");
    a.wq_b = w.bf16(p + "attn.wq_b.weight");
    a.wkv = w.bf16(p + "attn.wkv.weight");
    a.kv_norm = w.f(p + "attn.kv_norm.weight");
    a.sink = w.f(p + "attn.attn_sink");
    a.wo_a = w.bf16(p + "attn.wo_a.weight");
    a.wo_b = w.bf16(p + "attn.wo_b.weight");
    if (ratio > 0) a.compressor = compressor(w, p + "attn.compressor.");
    if (ratio == 4) {
      a.index_wq_b = w.bf16(p + "attn.indexer.wq_b.weight");
      a.index_proj = w.bf16(p + "attn.indexer.weights_proj.weight");
      a.index_compressor = compressor(w, p + "attn.indexer.compressor.");
    }

    MoeWeights& f = L.ffn;
    f.gate = w.f(p + "ffn.gate.weight");
    if (c.is_hash_layer(l))
      f.tid2eid = w.i(p + "ffn.gate.tid2eid");
    else
      f.bias = w.f(p + "ffn.gate.bias");
    f.experts.reserve(c.n_routed_experts);
    for (int e = 0; e < c.n_routed_experts; ++e)
      f.experts.push_back(expert(w, p + "ffn.experts." + std::to_string(e) + "."));
    f.device_experts = DeviceBuffer<ExpertWeightsBf16>(f.experts);
    if (c.n_shared_experts > 0) f.shared = expert(w, p + "ffn.shared_experts.");
  }
  return layers;
}

HeadWeights resolve_head(const DeviceWeights& w) {
  return HeadWeights{w.f("embed.weight"), hc(w, "hc_head"), w.f("norm.weight"),
                     w.bf16("head.weight")};
}

}  // namespace deepinfer::cuda

#include "deepinfer/runtime/cuda/forward/layer_weights.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace deepinfer::cuda {
namespace {

HcWeights hc(const DeviceWeights& w, const std::string& p) {
  return HcWeights{w.f(p + "_fn"), w.f(p + "_base"), w.f(p + "_scale")};
}

CompressorWeights compressor(const DeviceWeights& w, const std::string& p) {
  return CompressorWeights{w.matrix(p + "wkv.weight"), w.matrix(p + "wgate.weight"), w.f(p + "ape"),
                           w.f(p + "norm.weight")};
}

ExpertWeights expert(const DeviceWeights& w, const std::string& p) {
  return ExpertWeights{w.matrix(p + "w1.weight"), w.matrix(p + "w3.weight"),
                       w.matrix(p + "w2.weight")};
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
    a.wq_a = w.matrix(p + "attn.wq_a.weight");
    a.q_norm = w.f(p + "attn.q_norm.weight");
    a.wq_b = w.matrix(p + "attn.wq_b.weight");
    a.wkv = w.matrix(p + "attn.wkv.weight");
    a.kv_norm = w.f(p + "attn.kv_norm.weight");
    a.sink = w.f(p + "attn.attn_sink");
    a.wo_a = w.matrix(p + "attn.wo_a.weight");
    a.wo_b = w.matrix(p + "attn.wo_b.weight");
    if (ratio > 0) a.compressor = compressor(w, p + "attn.compressor.");
    if (ratio == 4) {
      a.index_wq_b = w.matrix(p + "attn.indexer.wq_b.weight");
      a.index_proj = w.matrix(p + "attn.indexer.weights_proj.weight");
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
    if (!f.experts.empty()) f.expert_format = f.experts[0].w1.format;
    for (const ExpertWeights& e : f.experts)
      for (const DeviceMatrix* m : {&e.w1, &e.w3, &e.w2})
        if (m->format != f.expert_format) {
          std::fprintf(stderr, "cuda forward: layer %d's routed experts mix weight formats\n", l);
          std::abort();
        }
    f.device_experts = DeviceBuffer<ExpertWeights>(f.experts);
    if (c.n_shared_experts > 0) f.shared = expert(w, p + "ffn.shared_experts.");
  }
  return layers;
}

HeadWeights resolve_head(const DeviceWeights& w) {
  return HeadWeights{w.f("embed.weight"), hc(w, "hc_head"), w.f("norm.weight"),
                     w.matrix("head.weight")};
}

}  // namespace deepinfer::cuda

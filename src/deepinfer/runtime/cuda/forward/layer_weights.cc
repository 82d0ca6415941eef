#include "deepinfer/runtime/cuda/forward/layer_weights.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace deepinfer::cuda {
namespace {

CompressorWeights compressor(const DeviceWeights& w, const std::string& p) {
  return CompressorWeights{w.matrix(p + "wkv.weight"), w.matrix(p + "wgate.weight"), w.f(p + "ape"),
                           w.f(p + "norm.weight")};
}

}  // namespace

HcWeights resolve_hc(const DeviceWeights& w, const std::string& p) {
  return HcWeights{w.f(p + "_fn"), w.f(p + "_base"), w.f(p + "_scale")};
}

ExpertWeights resolve_expert(const DeviceWeights& w, const std::string& p) {
  return ExpertWeights{w.matrix(p + "w1.weight"), w.matrix(p + "w3.weight"),
                       w.matrix(p + "w2.weight")};
}

void resolve_experts(const DeviceWeights& w, const std::string& p, int layer, int n_routed,
                     bool shared, MoeWeights* f) {
  f->experts.reserve(n_routed);
  for (int e = 0; e < n_routed; ++e)
    f->experts.push_back(resolve_expert(w, p + "ffn.experts." + std::to_string(e) + "."));
  if (!f->experts.empty()) f->expert_format = f->experts[0].w1.format;
  for (const ExpertWeights& e : f->experts)
    for (const DeviceMatrix* m : {&e.w1, &e.w3, &e.w2})
      if (m->format != f->expert_format) {
        std::fprintf(stderr, "cuda forward: layer %d's routed experts mix weight formats\n", layer);
        std::abort();
      }
  f->device_experts = DeviceBuffer<ExpertWeights>(f->experts);
  if (shared) f->shared = resolve_expert(w, p + "ffn.shared_experts.");
}

LayerWeights resolve_layer(const v4::Config& c, const DeviceWeights& w, const std::string& p,
                           int layer, int ratio, bool hash) {
  LayerWeights L;
  L.hc_attn = resolve_hc(w, p + "hc_attn");
  L.hc_ffn = resolve_hc(w, p + "hc_ffn");
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
  if (hash)
    f.tid2eid = w.i(p + "ffn.gate.tid2eid");
  else
    f.bias = w.f(p + "ffn.gate.bias");
  resolve_experts(w, p, layer, c.n_routed_experts, c.n_shared_experts > 0, &f);
  return L;
}

std::vector<LayerWeights> resolve_layers(const v4::Config& c, const DeviceWeights& w) {
  std::vector<LayerWeights> layers;
  layers.reserve(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l)
    layers.push_back(resolve_layer(c, w, "layers." + std::to_string(l) + ".", l,
                                   c.compress_ratio(l), c.is_hash_layer(l)));
  return layers;
}

MtpWeights resolve_mtp(const v4::Config& c, const DeviceWeights& w) {
  const std::string p = "mtp.0.";
  MtpWeights m;
  // Its block: the sliding window only, biased routing (the checkpoint's layout, spec §7).
  m.block = resolve_layer(c, w, p, c.num_layers, 0, false);
  m.e_proj = w.matrix(p + "e_proj.weight");
  m.h_proj = w.matrix(p + "h_proj.weight");
  m.enorm = w.f(p + "enorm.weight");
  m.hnorm = w.f(p + "hnorm.weight");
  m.norm = w.f(p + "norm.weight");
  m.hc_head = resolve_hc(w, p + "hc_head");
  return m;
}

HeadWeights resolve_head(const DeviceWeights& w) {
  return HeadWeights{w.f("embed.weight"), resolve_hc(w, "hc_head"), w.f("norm.weight"),
                     w.matrix("head.weight")};
}

}  // namespace deepinfer::cuda

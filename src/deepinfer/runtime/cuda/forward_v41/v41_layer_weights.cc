#include "deepinfer/runtime/cuda/forward_v41/v41_layer_weights.h"

#include <string>

namespace deepinfer::cuda::v41f {

V41Attention resolve_window_attention(const DeviceWeights& w, const std::string& ap) {
  V41Attention a;
  a.wq_a = w.matrix(ap + "wq_a.weight");
  a.q_norm = w.f(ap + "q_norm.weight");
  a.wq_b = w.matrix(ap + "wq_b.weight");
  a.wkv = w.matrix(ap + "wkv.weight");
  a.kv_norm = w.f(ap + "kv_norm.weight");
  a.sink = w.f(ap + "attn_sink");
  a.wo_a = w.matrix(ap + "wo_a.weight");
  a.wo_b = w.matrix(ap + "wo_b.weight");
  return a;
}

std::vector<V41Layer> resolve_v41_layers(const v41::Config& c, const DeviceWeights& w) {
  std::vector<V41Layer> layers(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    V41Layer& L = layers[l];
    L.hc_attn = resolve_hc(w, p + "hc_attn");
    L.hc_ffn = resolve_hc(w, p + "hc_ffn");
    L.attn_norm = w.f(p + "attn_norm.weight");
    L.ffn_norm = w.f(p + "ffn_norm.weight");
    const std::string ap = p + "attn.";
    L.attn = resolve_window_attention(w, ap);
    V41Attention& a = L.attn;
    if (c.is_kv_source(l)) {
      a.c_wkv = w.matrix(ap + "compressor.wkv.weight");
      if (c.compress_ratio(l) > 1) a.c_wgate = w.matrix(ap + "compressor.wgate.weight");
      a.c_norm = w.f(ap + "compressor.norm.weight");
      a.index_wk = w.matrix(ap + "indexer.wk.weight");
      a.index_k_norm = w.f(ap + "indexer.k_norm.weight");
    }
    if (c.is_index_source(l)) {
      a.index_wq_b = w.matrix(ap + "indexer.wq_b.weight");
      a.index_proj = w.matrix(ap + "indexer.weights_proj.weight");
    }
    MoeWeights& f = L.ffn;
    f.gate = w.f(p + "ffn.gate.weight");
    f.bias = w.f(p + "ffn.gate.bias");
    resolve_experts(w, p, l, c.n_routed_experts, c.n_shared_experts > 0, &f);
    if (c.is_engram_layer(l)) {
      L.engram.wkv = w.matrix(p + "engram.wkv.weight");
      L.engram.q_weight = w.f(p + "engram.q_weight");
      L.engram.k_weight = w.f(p + "engram.k_weight");
    }
  }
  return layers;
}

V41Head resolve_v41_head(const DeviceWeights& w) {
  return V41Head{w.f("embed.weight"), w.f("norm.weight"), w.matrix("head.weight")};
}

}  // namespace deepinfer::cuda::v41f

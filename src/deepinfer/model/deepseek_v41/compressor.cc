// CSA2 compressor of a KV source (spec §11.2.2-3): ratio 1 is a per-token latent norm(wkv h);
// ratio r > 1 pools each group of r tokens with a per-channel softmax gate (no ape, no overlap).
// The pre-RoPE latent feeds both the compressed KV and the group's indexer keys.
#include <algorithm>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/model/deepseek_v41/model_context.h"
#include "deepinfer/model/deepseek_v41/qat.h"

namespace deepinfer::v41 {
namespace {

// The latents (head_dim each, normalized, before RoPE) of the groups completed by these tokens.
std::vector<float> group_latents(const ModelContext& m, const std::string& p, const float* h,
                                 int64_t n, KvSourceState& s) {
  const int64_t hd = m.c.head_dim, H = m.c.hidden_size;
  const int r = s.ratio;
  std::vector<float> kv(n * hd), latents;
  cpu::linear(m.f(p + "wkv.weight"), hd, H, h, n, kv.data());
  if (r == 1) {
    latents = std::move(kv);
  } else {
    std::vector<float> gate(n * hd), pooled(hd);
    cpu::linear(m.f(p + "wgate.weight"), hd, H, h, n, gate.data());
    const std::vector<const float*> kv_rows(s.pending_kv.begin(), s.pending_kv.end());
    const std::vector<const float*> gate_rows(s.pending_gate.begin(), s.pending_gate.end());
    for (int64_t t = 0; t < n; ++t) {
      std::copy(&kv[t * hd], &kv[(t + 1) * hd], s.pending_kv[s.pending]);
      std::copy(&gate[t * hd], &gate[(t + 1) * hd], s.pending_gate[s.pending]);
      if (++s.pending < r) continue;
      cpu::softmax_pool(kv_rows.data(), gate_rows.data(), r, static_cast<int>(hd), pooled.data());
      latents.insert(latents.end(), pooled.begin(), pooled.end());
      s.pending = 0;
    }
  }
  const int64_t groups = static_cast<int64_t>(latents.size()) / hd;
  for (int64_t g = 0; g < groups; ++g)
    cpu::rms_norm(&latents[g * hd], m.f(p + "norm.weight"), hd, m.eps(), &latents[g * hd]);
  return latents;
}

}  // namespace

void compressor_forward(const ModelContext& m, int layer, const float* h, int64_t n,
                        KvSourceState& s) {
  const Config& c = m.c;
  const std::string p = layer_prefix(layer);
  const std::vector<float> latents = group_latents(m, p + "attn.compressor.", h, n, s);
  const int64_t hd = c.head_dim, ihd = c.index_head_dim, rd = c.rope_dim;
  const int64_t groups = static_cast<int64_t>(latents.size()) / hd;
  if (groups == 0) return;
  const int64_t first = s.num_entries();
  // Indexer keys come from the latent before RoPE; the entry is the latent rotated to its group's
  // first position.
  std::vector<float> keys(groups * ihd);
  cpu::linear(m.f(p + "attn.indexer.wk.weight"), ihd, hd, latents.data(), groups, keys.data());
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t pos = (first + g) * s.ratio;
    float *entry, *key;
    s.append_entry(&entry, &key);
    std::copy(&keys[g * ihd], &keys[(g + 1) * ihd], key);
    cpu::rms_norm(key, m.f(p + "attn.indexer.k_norm.weight"), ihd, m.eps(), key);
    m.compress_rope.rotate(key + ihd - rd, pos);
    quantize_indexer(key, ihd);
    std::copy(&latents[g * hd], &latents[(g + 1) * hd], entry);
    m.compress_rope.rotate(entry + hd - rd, pos);
    quantize_compressed_kv(entry, hd);
  }
}

}  // namespace deepinfer::v41

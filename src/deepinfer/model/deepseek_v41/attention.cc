// V4.1 attention sub-layer (spec §11.2.2-5): low-rank q with no per-head norm, one shared K=V
// head FP8-rounded before it is cached, the sliding window plus the group's picked compressed
// entries in one softmax with a per-head sink, output de-rotation, grouped output projection.
#include <algorithm>
#include <cmath>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/base/check.h"
#include "deepinfer/model/deepseek_v4/sink_attention_rows.h"
#include "deepinfer/model/deepseek_v41/model_context.h"
#include "deepinfer/model/deepseek_v41/qat.h"

namespace deepinfer::v41 {

std::string layer_prefix(int layer) { return "layers." + std::to_string(layer) + "."; }

void attention_query(const ModelContext& m, const std::string& p, const v4::RopeTable& rope,
                     const float* h, int64_t n, int64_t pos0, float* qr, float* q) {
  const Config& c = m.c;
  const int nh = c.num_heads, hd = c.head_dim, rd = c.rope_dim;
  const int64_t H = c.hidden_size, ql = c.q_lora_rank;
  cpu::linear(m.f(p + "attn.wq_a.weight"), ql, H, h, n, qr);
  for (int64_t t = 0; t < n; ++t)
    cpu::rms_norm(&qr[t * ql], m.f(p + "attn.q_norm.weight"), ql, m.eps(), &qr[t * ql]);
  cpu::linear(m.f(p + "attn.wq_b.weight"), int64_t(nh) * hd, ql, qr, n, q);
  for (int64_t t = 0; t < n; ++t)
    for (int hh = 0; hh < nh; ++hh) rope.rotate(&q[(t * nh + hh) * hd] + hd - rd, pos0 + t);
}

void attention_window_kv(const ModelContext& m, const std::string& p, const v4::RopeTable& rope,
                         const float* h, int64_t n, int64_t pos0, float* kv) {
  const Config& c = m.c;
  const int hd = c.head_dim, rd = c.rope_dim;
  cpu::linear(m.f(p + "attn.wkv.weight"), hd, c.hidden_size, h, n, kv);
  for (int64_t t = 0; t < n; ++t) {
    float* k = &kv[t * hd];
    cpu::rms_norm(k, m.f(p + "attn.kv_norm.weight"), hd, m.eps(), k);
    rope.rotate(k + hd - rd, pos0 + t);
    quantize_window_kv(k, hd);
  }
}

void attention_output(const ModelContext& m, const std::string& p, const float* o, int64_t n,
                      float* out) {
  const Config& c = m.c;
  const int g = c.o_groups, ol = c.o_lora_rank;
  const int64_t gin = int64_t(c.num_heads / g) * c.head_dim;
  std::vector<float> z(n * g * ol);
  cpu::grouped_linear(m.f(p + "attn.wo_a.weight"), g, ol, gin, o, n, z.data());
  cpu::linear(m.f(p + "attn.wo_b.weight"), c.hidden_size, int64_t(g) * ol, z.data(), n, out);
}

void attention_forward(const ModelContext& m, int layer, const float* h, int64_t n, int64_t pos0,
                       SequenceState& st, ForwardShared& shared, float* out, int64_t row0) {
  const Config& c = m.c;
  const std::string p = layer_prefix(layer);
  const int ratio = c.compress_ratio(layer);
  const int nh = c.num_heads, hd = c.head_dim, rd = c.rope_dim, W = c.sliding_window;
  const v4::RopeTable& rope = m.rope_for(ratio);

  // Only trailing layers (no state of their own besides the ring) start past the first row.
  DI_CHECK(row0 == 0 || (!c.is_kv_source(layer) && !c.is_index_source(layer)));
  std::vector<float> qr(n * c.q_lora_rank), q(n * nh * hd), kv(n * hd);
  attention_query(m, p, rope, h, n, pos0, qr.data(), q.data());
  attention_window_kv(m, p, rope, h, n, pos0, kv.data());

  // The source publishes this chunk's groups before anyone scores or attends, so an entry whose
  // group ends at token s is visible to s.
  const KvSourceState* src = nullptr;
  if (ratio > 0) {
    src = &st.sources[c.kv_source_of(layer)];
    if (c.is_kv_source(layer)) compressor_forward(m, layer, h, n, st.sources[layer]);
    if (c.is_index_source(layer)) indexer_forward(m, layer, *src, qr.data(), h, n, pos0, shared);
  }

  const std::vector<float*>& ring = st.window[layer];
  auto window_row = [&](int64_t pos) -> const float* {
    return pos >= pos0 ? &kv[(pos - pos0) * hd] : ring[pos % W];
  };
  const float* sinks = m.f(p + "attn.attn_sink");
  const float scale = static_cast<float>(std::pow(double(hd), -0.5));
  std::vector<float> o(n * nh * hd);
  v4::sink_attention_rows(
      q.data(), n, nh, hd, rd, W, pos0, sinks, scale, rope, window_row,
      [&](int64_t t, std::vector<const float*>* keys) {
        if (src)
          for (int64_t ent : shared.picks[row0 + t]) keys->push_back(src->entries[ent]);
      },
      o.data());
  for (int64_t t = std::max<int64_t>(0, n - W); t < n; ++t)
    std::copy(&kv[t * hd], &kv[(t + 1) * hd], ring[(pos0 + t) % W]);
  attention_output(m, p, o.data(), n, out);
}

}  // namespace deepinfer::v41

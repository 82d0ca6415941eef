// Attention sub-layer (spec §6.5): q path with unweighted per-head RMSNorm, one shared K=V head,
// sliding window + compressed entries (HCA: all visible; CSA: the indexer's top-k) in one softmax
// with a per-head sink, output de-rotation and the grouped output projection.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/model/deepseek_v4/model_context.h"
#include "deepinfer/model/deepseek_v4/sink_attention_rows.h"
#include "deepinfer/tensor/fake_quant.h"

namespace deepinfer::v4 {
namespace {

// Lightning indexer (spec §6.7): per query, the top-k visible compressed entries by
// sum_h w_h relu(q_h . k_t). Ties go to the earlier entry, so the choice never depends on how the
// sequence was chunked.
std::vector<int64_t> indexer_topk(const ModelContext& m, const std::string& p,
                                  const CompressorState& keys, const float* qr, const float* h,
                                  int64_t pos) {
  const Config& c = m.c;
  const int ih = c.index_n_heads, ihd = c.index_head_dim;
  const int64_t visible = (pos + 1) / 4;
  std::vector<int64_t> picks;
  if (visible == 0) return picks;
  std::vector<float> q(int64_t(ih) * ihd), w(ih);
  quantized_linear(m, m.f(p + "attn.indexer.wq_b.weight"), int64_t(ih) * ihd, c.q_lora_rank, qr, 1,
                   q.data());
  for (int hh = 0; hh < ih; ++hh) {
    float* qh = q.data() + int64_t(hh) * ihd;
    m.compress_rope.rotate(qh + ihd - c.rope_dim, pos);
    if (m.official()) {
      hadamard_transform(qh, ihd);
      fake_quant_fp4_blocks(qh, ihd, 32);
    }
  }
  cpu::linear(m.f(p + "attn.indexer.weights_proj.weight"), ih, c.hidden_size, h, 1, w.data());
  const float scale = 1.0f / std::sqrt(static_cast<float>(ihd));
  const float wscale = 1.0f / std::sqrt(static_cast<float>(ih));
  std::vector<float> score(visible);
  for (int64_t t = 0; t < visible; ++t)
    score[t] = cpu::indexer_score(q.data(), w.data(), keys.entries[t], ih, ihd, wscale, scale);
  return cpu::top_k_indices(score.data(), visible, c.index_topk);
}

}  // namespace

void attention_forward(const ModelContext& m, const std::string& p, int ratio, const float* h,
                       int64_t n, int64_t pos0, LayerState& st, float* out) {
  const Config& c = m.c;
  const int nh = c.num_heads, hd = c.head_dim, rd = c.rope_dim, W = c.sliding_window;
  const int64_t H = c.hidden_size, ql = c.q_lora_rank;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const RopeTable& rope = m.rope_for(ratio);

  std::vector<float> qr(n * ql), q(n * nh * hd), kv(n * hd);
  quantized_linear(m, m.f(p + "attn.wq_a.weight"), ql, H, h, n, qr.data());
  for (int64_t t = 0; t < n; ++t)
    cpu::rms_norm(&qr[t * ql], m.f(p + "attn.q_norm.weight"), ql, eps, &qr[t * ql]);
  quantized_linear(m, m.f(p + "attn.wq_b.weight"), int64_t(nh) * hd, ql, qr.data(), n, q.data());
  quantized_linear(m, m.f(p + "attn.wkv.weight"), hd, H, h, n, kv.data());
  for (int64_t t = 0; t < n; ++t) {
    for (int hh = 0; hh < nh; ++hh) {
      float* qh = &q[(t * nh + hh) * hd];
      cpu::rms_norm(qh, nullptr, hd, eps, qh);
      rope.rotate(qh + hd - rd, pos0 + t);
    }
    float* k = &kv[t * hd];
    cpu::rms_norm(k, m.f(p + "attn.kv_norm.weight"), hd, eps, k);
    rope.rotate(k + hd - rd, pos0 + t);
    if (m.official()) fake_quant_fp8_blocks(k, hd - rd, 64);
  }

  // Compressors see the chunk before attention: an entry completed by token s is visible to s.
  std::vector<std::vector<int64_t>> selected(n);
  if (ratio > 0) {
    compressor_forward(m, p, /*is_indexer=*/false, st.comp, h, n, pos0);
    if (ratio == 4) {
      compressor_forward(m, p, /*is_indexer=*/true, st.index, h, n, pos0);
      ThreadPool::default_pool().parallel_for(n, 1, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t)
          selected[t] = indexer_topk(m, p, st.index, &qr[t * ql], h + t * H, pos0 + t);
      });
    } else {
      for (int64_t t = 0; t < n; ++t) {
        selected[t].resize((pos0 + t + 1) / ratio);
        std::iota(selected[t].begin(), selected[t].end(), 0);
      }
    }
  }

  // Window rows: the ring's last W-1 positions before the chunk, then the chunk itself.
  auto window_row = [&](int64_t pos) -> const float* {
    return pos >= pos0 ? &kv[(pos - pos0) * hd] : st.ring[pos % W];
  };
  const float* sinks = m.f(p + "attn.attn_sink");
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> o(n * nh * hd);
  sink_attention_rows(
      q.data(), n, nh, hd, rd, W, pos0, sinks, scale, rope, window_row,
      [&](int64_t t, std::vector<const float*>* keys) {
        for (int64_t ent : selected[t]) keys->push_back(st.comp.entries[ent]);
      },
      o.data());
  for (int64_t t = 0; t < n; ++t)
    std::copy(&kv[t * hd], &kv[(t + 1) * hd], st.ring[(pos0 + t) % W]);

  // Grouped output: group g's heads (hpg * hd values) go through wo_a's g-th row block.
  const int g = c.o_groups, ol = c.o_lora_rank, hpg = nh / g;
  const int64_t gin = int64_t(hpg) * hd;
  std::vector<float> z(n * g * ol);
  cpu::grouped_linear(m.f(p + "attn.wo_a.weight"), g, ol, gin, o.data(), n, z.data());
  quantized_linear(m, m.f(p + "attn.wo_b.weight"), H, int64_t(g) * ol, z.data(), n, out);
}

}  // namespace deepinfer::v4

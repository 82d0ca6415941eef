// Attention sub-layer on the GPU (spec §6.5-6.7), the CPU's attention.cc over a whole chunk per
// launch: q/kv projections and norms, RoPE, the compressors, the indexer's top-k (CSA) or all
// visible entries (HCA), sink attention over the ring + selected entries, de-rotation and the
// grouped output projection.
#include <cmath>

#include "deepinfer/backend/cuda/attention/rope.h"
#include "deepinfer/backend/cuda/attention/sink_attention.h"
#include "deepinfer/backend/cuda/forward/forward_context.h"
#include "deepinfer/backend/cuda/forward/forward_kernels.h"
#include "deepinfer/backend/cuda/indexer/indexer.h"
#include "deepinfer/backend/cuda/norm/rms_norm.h"

namespace deepinfer::cuda {
namespace {

// CSA: per query the indexer's top-k of the visible indexer keys (spec §6.7).
void indexer_select(const ForwardContext& m, const AttentionWeights& wt, const __nv_bfloat16* qrb,
                    const __nv_bfloat16* hb, int64_t n, int64_t pos0, const int64_t* positions,
                    const DeviceCompressor& keys, int32_t* selected, int32_t* num_selected) {
  const v4::Config& c = m.c;
  const int ih = c.index_n_heads, ihd = c.index_head_dim, rd = c.rope_dim;
  float* q = grow(m.s.qi, n * ih * ihd);
  m.linear(wt.index_wq_b, qrb, n, int64_t(ih) * ihd, c.q_lora_rank, q);
  rope(q + ihd - rd, n * ih, ihd, rd, ih, positions, m.compress_inv_freq, false, m.stream);
  float* w = grow(m.s.wi, n * ih);
  m.linear(wt.index_proj, hb, n, ih, c.hidden_size, w);
  const int64_t entries = (pos0 + n) / keys.ratio;
  float* scores = grow(m.s.scores, size_t(n) * (entries > 0 ? entries : 1));
  IndexerArgs a;
  a.q = q;
  a.w = w;
  a.keys = keys.entries.get();
  a.num_queries = n;
  a.pos0 = pos0;
  a.num_entries = entries;
  a.num_heads = ih;
  a.head_dim = ihd;
  a.ratio = keys.ratio;
  a.weight_scale = 1.0f / std::sqrt(static_cast<float>(ih));
  a.score_scale = 1.0f / std::sqrt(static_cast<float>(ihd));
  indexer_scores(a, scores, m.stream);
  indexer_topk(scores, n, entries, pos0, keys.ratio, c.index_topk, selected, num_selected,
               m.stream);
}

}  // namespace

void attention_layer(const ForwardContext& m, const AttentionWeights& w, int ratio, const float* h,
                     int64_t n, int64_t pos0, DeviceLayerState& st, float* out) {
  const v4::Config& c = m.c;
  const int nh = c.num_heads, hd = c.head_dim, rd = c.rope_dim;
  const int64_t H = c.hidden_size, ql = c.q_lora_rank;
  const double* inv_freq = ratio > 0 ? m.compress_inv_freq : m.main_inv_freq;
  cudaStream_t s = m.stream;

  __nv_bfloat16* hb = grow(m.s.hb, n * H);
  to_bf16(h, n * H, hb, s);
  float* qr = grow(m.s.qr, n * ql);
  m.linear(w.wq_a, hb, n, ql, H, qr);
  rms_norm(qr, w.q_norm, n, ql, m.eps(), qr, s);
  __nv_bfloat16* qrb = grow(m.s.qrb, n * ql);
  to_bf16(qr, n * ql, qrb, s);
  float* q = grow(m.s.q, n * nh * hd);
  m.linear(w.wq_b, qrb, n, int64_t(nh) * hd, ql, q);
  float* kv = grow(m.s.kv, n * hd);
  m.linear(w.wkv, hb, n, hd, H, kv);

  int64_t* positions = grow(m.s.positions, n);
  fill_positions(positions, n, pos0, 1, s);
  rms_norm(q, nullptr, n * nh, hd, m.eps(), q, s);  // per head, unweighted
  rope(q + hd - rd, n * nh, hd, rd, nh, positions, inv_freq, false, s);
  rms_norm(kv, w.kv_norm, n, hd, m.eps(), kv, s);
  rope(kv + hd - rd, n, hd, rd, 1, positions, inv_freq, false, s);

  // Compressors see the chunk before attention: an entry completed by token s is visible to s.
  int max_selected = 0;
  int32_t* selected = nullptr;
  int32_t* num_selected = nullptr;
  if (ratio > 0) {
    compressor_layer(m, w.compressor, st.comp, hb, n, pos0);
    num_selected = grow(m.s.num_selected, n);
    if (ratio == 4) {
      compressor_layer(m, w.index_compressor, st.index, hb, n, pos0);
      max_selected = c.index_topk;
      selected = grow(m.s.selected, n * max_selected);
      indexer_select(m, w, qrb, hb, n, pos0, positions, st.index, selected, num_selected);
      if (m.trace) m.record(m.trace->selected[m.layer], selected, n * max_selected);
    } else {
      max_selected = static_cast<int>((pos0 + n) / ratio);
      selected = grow(m.s.selected, n * (max_selected > 0 ? max_selected : 1));
      select_all_visible(n, pos0, ratio, max_selected, selected, num_selected, s);
    }
  }

  ring_write(kv, n, pos0, hd, st.ring.get(), st.ring_rows, s);
  float* o = grow(m.s.o, n * nh * hd);
  SinkAttentionArgs a;
  a.q = q;
  a.ring = st.ring.get();
  a.ring_rows = st.ring_rows;
  a.entries = ratio > 0 ? st.comp.entries.get() : nullptr;
  a.selected = selected;
  a.num_selected = num_selected;
  a.max_selected = max_selected;
  a.sinks = w.sink;
  a.out = o;
  a.num_queries = n;
  a.pos0 = pos0;
  a.num_heads = nh;
  a.head_dim = hd;
  a.window = c.sliding_window;
  a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  sink_attention(a, s);
  rope(o + hd - rd, n * nh, hd, rd, nh, positions, inv_freq, /*inverse=*/true, s);

  // Grouped output: group g's heads (hpg * hd values) go through wo_a's g-th row block.
  const int g = c.o_groups, ol = c.o_lora_rank;
  const int64_t gin = int64_t(nh / g) * hd;
  __nv_bfloat16* ob = grow(m.s.ob, n * nh * hd);
  split_groups_bf16(o, n, g, gin, ob, s);
  float* zg = grow(m.s.zg, n * g * ol);
  for (int gg = 0; gg < g; ++gg)
    m.gemm.bf16(w.wo_a + int64_t(gg) * ol * gin, ob + gg * n * gin, zg + gg * n * ol, n, ol, gin,
                s);
  float* z = grow(m.s.z, n * g * ol);
  merge_groups(zg, n, g, ol, z, s);
  __nv_bfloat16* zb = grow(m.s.zb, n * g * ol);
  to_bf16(z, n * g * ol, zb, s);
  m.linear(w.wo_b, zb, n, H, int64_t(g) * ol, out);
}

}  // namespace deepinfer::cuda

// Attention sub-layer on the GPU (spec §6.5-6.7), the CPU's attention.cc over many rows per
// launch: q/kv projections and norms, RoPE, the compressor and indexer projections over all rows;
// then per sequence segment the compressors, the indexer's top-k (CSA) or all visible entries
// (HCA) and sink attention over its ring + selected entries; then de-rotation and the grouped
// output projection over all rows again.
#include <cmath>

#include "deepinfer/backend/cuda/attention/rope.h"
#include "deepinfer/backend/cuda/attention/sink_attention.h"
#include "deepinfer/backend/cuda/forward/forward_context.h"
#include "deepinfer/backend/cuda/forward/forward_kernels.h"
#include "deepinfer/backend/cuda/indexer/indexer.h"
#include "deepinfer/backend/cuda/norm/rms_norm.h"

namespace deepinfer::cuda {
namespace {

// CSA: per query of one segment the indexer's top-k of the visible indexer keys (spec §6.7);
// q [n, heads, dim] rotated and w [n, heads] are the segment's rows of the indexer projections.
void indexer_select(const ForwardContext& m, const float* q, const float* w, int64_t n,
                    int64_t pos0, const DeviceCompressor& keys, int32_t* selected,
                    int32_t* num_selected) {
  const v4::Config& c = m.c;
  const int ih = c.index_n_heads, ihd = c.index_head_dim;
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
                     int64_t rows, const int64_t* positions, const std::vector<RowSegment>& segs,
                     float* out) {
  const v4::Config& c = m.c;
  const int nh = c.num_heads, hd = c.head_dim, rd = c.rope_dim;
  const int ih = c.index_n_heads, ihd = c.index_head_dim;
  const int64_t H = c.hidden_size, ql = c.q_lora_rank, n = rows;
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

  rms_norm(q, nullptr, n * nh, hd, m.eps(), q, s);  // per head, unweighted
  rope(q + hd - rd, n * nh, hd, rd, nh, positions, inv_freq, false, s);
  rms_norm(kv, w.kv_norm, n, hd, m.eps(), kv, s);
  rope(kv + hd - rd, n, hd, rd, 1, positions, inv_freq, false, s);

  // Position-independent projections of the compressors and the indexer, over all rows.
  const int cw = ratio == 4 ? 2 * hd : hd, iw = 2 * ihd;
  float *ckv = nullptr, *cgate = nullptr, *ikv = nullptr, *igate = nullptr;
  float *iq = nullptr, *iwt = nullptr;
  if (ratio > 0) {
    ckv = grow(m.s.ckv, n * cw);
    cgate = grow(m.s.cgate, n * cw);
    compressor_project(m, w.compressor, cw, hb, n, ckv, cgate);
  }
  if (ratio == 4) {
    ikv = grow(m.s.ikv, n * iw);
    igate = grow(m.s.igate, n * iw);
    compressor_project(m, w.index_compressor, iw, hb, n, ikv, igate);
    iq = grow(m.s.qi, n * ih * ihd);
    m.linear(w.index_wq_b, qrb, n, int64_t(ih) * ihd, ql, iq);
    rope(iq + ihd - rd, n * ih, ihd, rd, ih, positions, m.compress_inv_freq, false, s);
    iwt = grow(m.s.wi, n * ih);
    m.linear(w.index_proj, hb, n, ih, H, iwt);
  }

  float* o = grow(m.s.o, n * nh * hd);
  for (const RowSegment& g : segs) {
    DeviceLayerState& st = g.seq->layers[m.layer];
    const int64_t r0 = g.row0, len = g.n, pos0 = g.pos0;
    // Compressors see the segment before attention: an entry completed by token s is visible
    // to s.
    int max_selected = 0;
    int32_t* selected = nullptr;
    int32_t* num_selected = nullptr;
    if (ratio > 0) {
      compressor_update(m, w.compressor, st.comp, ckv + r0 * cw, cgate + r0 * cw, len, pos0);
      num_selected = grow(m.s.num_selected, len);
      if (ratio == 4) {
        compressor_update(m, w.index_compressor, st.index, ikv + r0 * iw, igate + r0 * iw, len,
                          pos0);
        max_selected = c.index_topk;
        selected = grow(m.s.selected, len * max_selected);
        indexer_select(m, iq + r0 * ih * ihd, iwt + r0 * ih, len, pos0, st.index, selected,
                       num_selected);
        if (m.trace) m.record(m.trace->selected[m.layer], selected, len * max_selected);
      } else {
        max_selected = static_cast<int>((pos0 + len) / ratio);
        selected = grow(m.s.selected, len * (max_selected > 0 ? max_selected : 1));
        select_all_visible(len, pos0, ratio, max_selected, selected, num_selected, s);
      }
    }

    ring_write(kv + r0 * hd, len, pos0, hd, st.ring.get(), st.ring_rows, s);
    SinkAttentionArgs a;
    a.q = q + r0 * nh * hd;
    a.ring = st.ring.get();
    a.ring_rows = st.ring_rows;
    a.entries = ratio > 0 ? st.comp.entries.get() : nullptr;
    a.selected = selected;
    a.num_selected = num_selected;
    a.max_selected = max_selected;
    a.sinks = w.sink;
    a.out = o + r0 * nh * hd;
    a.num_queries = len;
    a.pos0 = pos0;
    a.num_heads = nh;
    a.head_dim = hd;
    a.window = c.sliding_window;
    a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    sink_attention(a, s);
  }
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

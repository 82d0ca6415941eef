// deepseek_v41 attention on the GPU (spec §11.2.2-5), the CPU's attention.cc, compressor.cc and
// indexer.cc over many rows: projections, norms, RoPE and the simulated FP8/FP4 rounding over all
// rows; then per sequence segment the KV source's compressor, the index source's scores, two-level
// top-k and picks, and sink attention over the ring + the segment's own keys + the picked
// entries, then the ring write; then de-rotation and the grouped output projection over all rows.
#include <algorithm>
#include <cmath>

#include "deepinfer/backend/cuda/attention/norm_rope.h"
#include "deepinfer/backend/cuda/attention/rope.h"
#include "deepinfer/backend/cuda/attention/sink_attention.h"
#include "deepinfer/backend/cuda/compressor/compressor_pool.h"
#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/indexer/candidates.h"
#include "deepinfer/backend/cuda/indexer/indexer.h"
#include "deepinfer/backend/cuda/norm/rms_norm.h"
#include "deepinfer/backend/cuda/quant/fake_quant.h"
#include "deepinfer/runtime/cuda/forward/forward_kernels.h"
#include "deepinfer/runtime/cuda/forward_v41/v41_forward.h"

namespace deepinfer::cuda::v41f {

void V41Context::linear(const DeviceMatrix& w, const __nv_bfloat16* xb, int64_t n, int64_t out,
                        int64_t in, float* y) const {
  checked_linear(lin, w, xb, n, out, in, y, stream);
}

namespace {

// The projections over all rows that the per-segment state ops read.
struct Projected {
  const float *q, *kv;       // [rows, heads * head_dim], [rows, head_dim]: rotated, kv FP8-rounded
  const float *ckv, *cgate;  // KV source: compressor projections [rows, head_dim]
  const float *iq, *iw;      // index source: rotated FP4-rounded queries, head weights
};

void copy_rows(float* dst, const float* src, int64_t floats, cudaStream_t s) {
  if (floats > 0) DI_CUDA_CHECK(cudaMemcpyAsync(dst, src, floats * 4, cudaMemcpyDeviceToDevice, s));
}

// A KV source's compressor over one segment (compressor.cc): the groups the segment completes
// become latents (ratio 1: the row itself; ratio r: softmax-gated pooling of the pending rows and
// the segment's), normalized; each gives an indexer key (wk, k_norm, RoPE, FP4) and an entry
// (RoPE at its group's first position, FP4), stored in the sequence's token pages.
void compress_segment(const V41Context& m, int layer, const V41Attention& w, const Projected& p,
                      const V41Segment& g) {
  const v41::Config& c = m.c;
  const V41LayerView& st = g.seq->layers[layer];
  const int r = c.compress_ratio(layer), hd = c.head_dim, ihd = c.index_head_dim;
  const int rd = c.rope_dim;
  cudaStream_t s = m.stream;
  const int64_t pending = g.pos0 % r, total = pending + g.n, groups = total / r;
  const int64_t first = g.pos0 / r;  // entries before the segment
  float* lat = grow(m.x.latents, std::max<int64_t>(groups, 1) * hd);
  if (r == 1) {
    copy_rows(lat, p.ckv + g.row0 * hd, g.n * hd, s);
  } else {
    float* gk = grow(m.x.group_kv, total * hd);
    float* gg = grow(m.x.group_gate, total * hd);
    copy_rows(gk, st.pending_kv, pending * hd, s);
    copy_rows(gg, st.pending_gate, pending * hd, s);
    copy_rows(gk + pending * hd, p.ckv + g.row0 * hd, g.n * hd, s);
    copy_rows(gg + pending * hd, p.cgate + g.row0 * hd, g.n * hd, s);
    if (groups > 0) compressor_pool(gk, gg, groups, r, hd, lat, s);
    // Position p's row goes to slot p % r, as one-token steps and the CPU leave them, also when
    // its group is complete: the pages then hold the same bytes whatever the chunking.
    const int64_t from = std::max<int64_t>(g.pos0, g.pos0 + g.n - r), end = g.pos0 + g.n;
    for (int64_t a = from; a < end;) {
      const int64_t slot = a % r, k = std::min<int64_t>(end - a, r - slot);
      const int64_t src = (g.row0 + a - g.pos0) * hd;
      copy_rows(st.pending_kv + slot * hd, p.ckv + src, k * hd, s);
      copy_rows(st.pending_gate + slot * hd, p.cgate + src, k * hd, s);
      a += k;
    }
  }
  if (groups == 0) return;
  rms_norm(lat, w.c_norm, groups, hd, m.eps(), lat, s);
  __nv_bfloat16* latb = grow(m.x.latents_b, groups * hd);
  to_bf16(lat, groups * hd, latb, s);
  float* keys = grow(m.x.keys, groups * ihd);
  m.linear(w.index_wk, latb, groups, ihd, hd, keys);
  rms_norm(keys, w.index_k_norm, groups, ihd, m.eps(), keys, s);
  int64_t* pos = grow(m.x.s.entry_positions, groups);
  fill_positions(pos, groups, first * r, r, s);
  rope(keys + ihd - rd, groups, ihd, rd, 1, pos, m.compress_inv_freq, false, s);
  fake_quant_indexer(keys, groups, ihd, s);
  rope(lat + hd - rd, groups, hd, rd, 1, pos, m.compress_inv_freq, false, s);
  fake_quant_compressed_kv(lat, groups, hd, s);
  store_entries(lat, groups, first, st.entries, s);
  store_entries(keys, groups, first, st.keys, s);
}

// An index source over one segment (indexer.cc): scores of the group's visible keys, the
// candidate source's kept blocks (or, after it, scores only inside them), and the top index_topk
// picks into the call's pick rows, which the group's later layers reuse.
void index_segment(const V41Context& m, int layer, const Projected& p, const V41Segment& g) {
  const v41::Config& c = m.c;
  const int ih = c.index_n_heads, ihd = c.index_head_dim, top = c.index_topk;
  const int r = c.compress_ratio(layer);
  const V41LayerView& src = g.seq->layers[c.kv_source_of(layer)];
  cudaStream_t s = m.stream;
  int32_t* sel = m.x.s.selected.get() + g.row0 * top;
  int32_t* nsel = m.x.s.num_selected.get() + g.row0;
  const int64_t entries = (g.pos0 + g.n) / r;
  if (entries == 0) {
    DI_CUDA_CHECK(cudaMemsetAsync(nsel, 0, g.n * 4, s));
    return;
  }
  float* scores = grow(m.x.s.scores, g.n * entries);
  IndexerArgs a;
  a.q = p.iq + g.row0 * ih * ihd;
  a.w = p.iw + g.row0 * ih;
  a.keys = src.keys;
  a.num_queries = g.n;
  a.pos0 = g.pos0;
  a.num_entries = entries;
  a.num_heads = ih;
  a.head_dim = ihd;
  a.ratio = r;
  a.weight_scale = static_cast<float>(std::pow(double(ih), -0.5));
  a.score_scale = static_cast<float>(std::pow(double(ihd), -0.5));
  indexer_scores(a, scores, s);
  CandidateArgs ca;
  ca.num_queries = g.n;
  ca.num_entries = entries;
  ca.pos0 = g.pos0;
  ca.ratio = r;
  ca.block_size = c.candidate_block_size > 0 ? c.candidate_block_size : 1;
  ca.top_blocks = c.candidate_topk_blocks;
  ca.max_blocks = m.max_blocks;
  uint8_t* keep = m.x.keep.get() + g.row0 * m.max_blocks;
  std::vector<int64_t> visible;
  if (m.trace)
    for (int64_t t = 0; t < g.n; ++t) visible.push_back(std::min(entries, (g.pos0 + t + 1) / r));
  if (c.is_candidate_source(layer)) {
    candidate_blocks(ca, scores, keep, s);
    if (m.trace)
      trace_topk_gaps(m, scores, g.n, entries, visible, c.candidate_topk_blocks, g.row0,
                      ca.block_size);
  }
  const bool masked = c.uses_candidates(layer);
  if (masked) mask_outside_candidates(ca, keep, scores, s);
  if (m.trace) trace_topk_gaps(m, scores, g.n, entries, visible, top, g.row0);
  indexer_topk(scores, g.n, entries, g.pos0, r, top, sel, nsel, s);
  if (masked) drop_masked_picks(scores, g.n, entries, top, sel, nsel, s);
}

void attend_segment(const V41Context& m, int layer, const V41Attention& w, const Projected& p,
                    const V41Segment& g, float* o) {
  const v41::Config& c = m.c;
  const int nh = c.num_heads, hd = c.head_dim;
  const V41LayerView& st = g.seq->layers[layer];
  SinkAttentionArgs a;
  a.sinks = w.sink;
  a.num_heads = nh;
  a.head_dim = hd;
  a.window = c.sliding_window;
  a.scale = static_cast<float>(std::pow(double(hd), -0.5));
  a.q = p.q + g.row0 * nh * hd;
  a.fresh = p.kv + g.row0 * hd;  // the ring holds positions before pos0 only
  a.ring = st.ring;
  a.ring_rows = c.sliding_window;
  if (c.compress_ratio(layer) > 0) {
    a.entries = g.seq->layers[c.kv_source_of(layer)].entries;
    a.selected = m.x.s.selected.get() + (m.pick_row0 + g.row0) * c.index_topk;
    a.num_selected = m.x.s.num_selected.get() + m.pick_row0 + g.row0;
    a.max_selected = c.index_topk;
  }
  a.out = o + g.row0 * nh * hd;
  a.num_queries = g.n;
  a.pos0 = g.pos0;
  // Batch-invariant: one kernel at every launch width, as deepseek_v4's (attention_layer.cc).
  if (m.gemm.batch_invariant()) a.kernel = SinkKernel::kFp32;
  sink_attention(a, m.stream);
  ring_write(p.kv + g.row0 * hd, g.n, g.pos0, hd, st.ring, c.sliding_window, m.stream);
}

}  // namespace

void trace_topk_gaps(const V41Context& m, const float* dev_scores, int64_t n, int64_t stride,
                     const std::vector<int64_t>& visible, int64_t top, int64_t row0,
                     int block_size) {
  std::vector<float> h(n * stride);
  DI_CUDA_CHECK(
      cudaMemcpyAsync(h.data(), dev_scores, h.size() * 4, cudaMemcpyDeviceToHost, m.stream));
  DI_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  for (int64_t t = 0; t < n; ++t) {
    // Candidates: entries, or blocks of block_size entries scored by their best (the newest
    // block is pinned, so it is not a candidate here).
    std::vector<float> v;
    const int64_t vis = visible[t];
    if (block_size == 1) {
      for (int64_t e = 0; e < vis; ++e)
        if (h[t * stride + e] > -INFINITY) v.push_back(h[t * stride + e]);
    } else {
      const int64_t pinned = vis > 0 ? (vis - 1) / block_size : -1;
      for (int64_t b = 0; b * block_size < vis; ++b) {
        if (b == pinned) continue;
        float best = -INFINITY;
        for (int64_t e = b * block_size; e < std::min<int64_t>(vis, (b + 1) * block_size); ++e)
          best = std::max(best, h[t * stride + e]);
        v.push_back(best);
      }
      if (pinned >= 0) --top;  // the pinned block takes one of the places
    }
    if (int64_t(v.size()) <= top || top <= 0) continue;
    std::sort(v.begin(), v.end(), std::greater<float>());
    double scale = 0;
    for (float x : v) scale = std::max(scale, std::fabs(double(x)));
    const double gap = scale > 0 ? (double(v[top - 1]) - v[top]) / scale : 0.0;
    double& g = m.trace->gap[row0 + t];
    g = std::min(g, gap);
  }
}

QueryKv v41_query_kv(const V41Context& m, const V41Attention& w, const float* h,
                     const double* inv_freq) {
  const v41::Config& c = m.c;
  const int nh = c.num_heads, hd = c.head_dim, rd = c.rope_dim;
  const int64_t H = c.hidden_size, ql = c.q_lora_rank, n = m.rows;
  ForwardScratch& sc = m.x.s;
  cudaStream_t s = m.stream;
  __nv_bfloat16* hb = grow(sc.hb, n * H);
  to_bf16(h, n * H, hb, s);
  float* qr = grow(sc.qr, n * ql);
  m.linear(w.wq_a, hb, n, ql, H, qr);
  __nv_bfloat16* qrb = grow(sc.qrb, n * ql);
  rms_norm(qr, w.q_norm, n, ql, m.eps(), qrb, s);  // only its bf16 copy is read
  float* q = grow(sc.q, n * nh * hd);
  m.linear(w.wq_b, qrb, n, int64_t(nh) * hd, ql, q);  // no per-head norm in V4.1
  float* kv = grow(sc.kv, n * hd);
  m.linear(w.wkv, hb, n, hd, H, kv);
  // kv by kv_norm, q not normed; both rotated: one launch.
  norm_rope({q, n * nh, nh, RowNorm::kNone, nullptr}, {kv, n, 1, RowNorm::kPerBlock, w.kv_norm}, hd,
            rd, m.positions, inv_freq, m.eps(), s);
  fake_quant_window_kv(kv, n, hd, s);
  return QueryKv{q, kv, hb, qrb};
}

void v41_attention(const V41Context& m, int layer, const V41Attention& w, const float* h,
                   float* out) {
  const v41::Config& c = m.c;
  const int nh = c.num_heads, hd = c.head_dim, rd = c.rope_dim;
  const int ih = c.index_n_heads, ihd = c.index_head_dim;
  const int ratio = c.compress_ratio(layer);
  const int64_t H = c.hidden_size, ql = c.q_lora_rank, n = m.rows;
  const double* inv_freq = ratio > 0 ? m.compress_inv_freq : m.main_inv_freq;
  ForwardScratch& sc = m.x.s;
  cudaStream_t s = m.stream;

  const QueryKv qk = v41_query_kv(m, w, h, inv_freq);
  const __nv_bfloat16 *hb = qk.hb, *qrb = qk.qrb;
  Projected p{qk.q, qk.kv, nullptr, nullptr, nullptr, nullptr};
  if (c.is_kv_source(layer)) {
    float* ckv = grow(sc.ckv, n * hd);
    m.linear(w.c_wkv, hb, n, hd, H, ckv);
    p.ckv = ckv;
    if (ratio > 1) {
      float* cgate = grow(sc.cgate, n * hd);
      m.linear(w.c_wgate, hb, n, hd, H, cgate);
      p.cgate = cgate;
    }
  }
  if (c.is_index_source(layer)) {
    float* iq = grow(sc.qi, n * ih * ihd);
    m.linear(w.index_wq_b, qrb, n, int64_t(ih) * ihd, ql, iq);
    rope(iq + ihd - rd, n * ih, ihd, rd, ih, m.positions, m.compress_inv_freq, false, s);
    fake_quant_indexer(iq, n * ih, ihd, s);
    float* iw = grow(sc.wi, n * ih);
    m.linear(w.index_proj, hb, n, ih, H, iw);
    p.iq = iq;
    p.iw = iw;
  }

  float* o = grow(sc.o, n * nh * hd);
  // The source publishes the segment's groups before anyone scores or attends: an entry whose
  // group ends at token s is visible to s.
  for (const V41Segment& g : m.segs) {
    if (c.is_kv_source(layer)) compress_segment(m, layer, w, p, g);
    if (c.is_index_source(layer)) index_segment(m, layer, p, g);
    attend_segment(m, layer, w, p, g, o);
  }
  rope(o + hd - rd, n * nh, hd, rd, nh, m.positions, inv_freq, /*inverse=*/true, s);
  grouped_output(m.lin, sc, w.wo_a, w.wo_b, o, n, c.o_groups, int64_t(nh / c.o_groups) * hd,
                 c.o_lora_rank, H, s, out);
}

}  // namespace deepinfer::cuda::v41f

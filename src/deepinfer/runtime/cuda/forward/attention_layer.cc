// Attention sub-layer on the GPU (spec §6.5-6.7), the CPU's attention.cc over many rows per
// launch: q/kv projections and norms, RoPE, the compressor and indexer projections over all rows;
// then the compressors, the indexer's top-k (CSA) or all visible entries (HCA) and sink attention
// over the ring + the segment's own keys + selected entries, then the ring write, per sequence
// segment (prefill) or over all rows through the step's tables (batched decode, graph-safe); then
// de-rotation and the grouped output projection over all rows again.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "deepinfer/backend/cuda/attention/norm_rope.h"
#include "deepinfer/backend/cuda/attention/rope.h"
#include "deepinfer/backend/cuda/attention/sink_attention.h"
#include "deepinfer/backend/cuda/indexer/indexer.h"
#include "deepinfer/backend/cuda/norm/rms_norm.h"
#include "deepinfer/runtime/cuda/forward/forward_context.h"
#include "deepinfer/runtime/cuda/forward/forward_kernels.h"

namespace deepinfer::cuda {
namespace {

// Phases of --phase-times inside the state ops (the compressors of CSA and HCA layers together).
constexpr const char* kCompressorsPhase = "attention: compressors (CSA, HCA)";
constexpr const char* kIndexerPhase = "attention: CSA indexer (scores, top-k)";

// The position-independent projections over all rows that the state ops read.
struct Projected {
  const float *q, *kv;                 // [rows, heads, head_dim], [rows, head_dim]; rotated
  const float *ckv, *cgate;            // compressor, ratio > 0
  const float *ikv, *igate, *iq, *iw;  // indexer (CSA)
};

SinkAttentionArgs sink_args(const ForwardContext& m, const AttentionWeights& w) {
  const v4::Config& c = m.c;
  SinkAttentionArgs a;
  a.sinks = w.sink;
  a.num_heads = c.num_heads;
  a.head_dim = c.head_dim;
  a.window = c.sliding_window;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  // Batch-invariant: one kernel at every launch width (the tensor-core one is taken only from
  // kSinkMmaMinQueries queries, so a query would round differently alone and in a chunk).
  if (m.gemm.batch_invariant()) a.kernel = SinkKernel::kFp32;
  return a;
}

IndexerArgs indexer_args(const ForwardContext& m, const float* q, const float* w) {
  const int ih = m.c.index_n_heads, ihd = m.c.index_head_dim;
  IndexerArgs a;
  a.q = q;
  a.w = w;
  a.num_heads = ih;
  a.head_dim = ihd;
  a.ratio = 4;
  a.weight_scale = 1.0f / std::sqrt(static_cast<float>(ih));
  a.score_scale = 1.0f / std::sqrt(static_cast<float>(ihd));
  return a;
}

// One sequence's rows (a prefill chunk): compressors, the indexer's top-k (CSA) or all visible
// entries (HCA), ring writes and sink attention, launched with that segment's host positions.
void segment_state(const ForwardContext& m, const AttentionWeights& w, int ratio,
                   const Projected& p, const RowSegment& g, float* o) {
  const v4::Config& c = m.c;
  const int nh = c.num_heads, hd = c.head_dim;
  const int ih = c.index_n_heads, ihd = c.index_head_dim;
  const int cw = ratio == 4 ? 2 * hd : hd, iw = 2 * ihd;
  cudaStream_t s = m.stream;
  const LayerView& st = g.seq->layers[m.layer];
  const int64_t r0 = g.row0, len = g.n, pos0 = g.pos0;
  // Compressors see the segment before attention: an entry completed by token s is visible
  // to s.
  int max_selected = 0;
  int32_t* selected = nullptr;
  int32_t* num_selected = nullptr;
  if (ratio > 0) {
    compressor_update(m, w.compressor, st.comp, p.ckv + r0 * cw, p.cgate + r0 * cw, len, pos0);
    num_selected = grow(m.s.num_selected, len);
    if (ratio == 4) {
      compressor_update(m, w.index_compressor, st.index, p.ikv + r0 * iw, p.igate + r0 * iw, len,
                        pos0);
      m.mark(kCompressorsPhase);
      max_selected = c.index_topk;
      selected = grow(m.s.selected, len * max_selected);
      const int64_t entries = (pos0 + len) / 4;
      float* scores = grow(m.s.scores, size_t(len) * (entries > 0 ? entries : 1));
      IndexerArgs a = indexer_args(m, p.iq + r0 * ih * ihd, p.iw + r0 * ih);
      a.keys = st.index.entries;
      a.num_queries = len;
      a.pos0 = pos0;
      a.num_entries = entries;
      indexer_scores(a, scores, s);
      indexer_topk(scores, len, entries, pos0, 4, c.index_topk, selected, num_selected, s);
      if (m.trace) m.record(m.trace->selected[m.layer], selected, len * max_selected);
      m.mark(kIndexerPhase);
    } else {
      m.mark(kCompressorsPhase);
      max_selected = static_cast<int>((pos0 + len) / ratio);
      selected = grow(m.s.selected, len * (max_selected > 0 ? max_selected : 1));
      select_all_visible(len, pos0, ratio, max_selected, selected, num_selected, s);
    }
  }
  SinkAttentionArgs a = sink_args(m, w);
  a.q = p.q + r0 * nh * hd;
  a.fresh = p.kv + r0 * hd;  // the ring holds positions before pos0 only
  a.ring = st.ring;
  a.ring_rows = st.ring_rows;
  if (ratio > 0) a.entries = st.comp.entries;
  a.selected = selected;
  a.num_selected = num_selected;
  a.max_selected = max_selected;
  a.out = o + r0 * nh * hd;
  a.num_queries = len;
  a.pos0 = pos0;
  sink_attention(a, s);
  ring_write(p.kv + r0 * hd, len, pos0, hd, st.ring, st.ring_rows, s);
  // Snapshots ending in the segment: their copies (the state at the segment's start) advanced
  // over the rows before end_pos, by the same state ops.
  if (g.snapshots)
    for (const SegmentSnapshot& sn : *g.snapshots) {
      const int64_t k = sn.end_pos - pos0;
      const LayerView& v = sn.state->layers[m.layer];
      if (ratio > 0)
        compressor_advance_state(w.compressor, v.comp, p.ckv + r0 * cw, p.cgate + r0 * cw, k, pos0,
                                 s);
      if (ratio == 4)
        compressor_advance_state(w.index_compressor, v.index, p.ikv + r0 * iw, p.igate + r0 * iw, k,
                                 pos0, s);
      ring_write(p.kv + r0 * hd, k, pos0, hd, v.ring, v.ring_rows, s);
    }
}

DecodeCompressorArgs decode_compressor_args(const ForwardContext& m, const CompressorWeights& w,
                                            const CompressorSlots& state, const float* kv,
                                            const float* gate, int ratio, int dim) {
  DecodeCompressorArgs a;
  a.kv = kv;
  a.gate = gate;
  a.ape = w.ape;
  a.norm = w.norm;
  a.inv_freq = m.compress_inv_freq;
  a.eps = m.eps();
  a.ratio = ratio;
  a.dim = dim;
  a.width = ratio == 4 ? 2 * dim : dim;
  a.rope_dim = m.c.rope_dim;
  a.state = state;
  return a;
}

// A batched decode step: the same ops over every row at once, each row reaching its own
// sequence through the slot tables, every size fixed by the row count and max_tokens.
void batched_state(const ForwardContext& m, const AttentionWeights& w, int ratio,
                   const Projected& p, float* o) {
  const v4::Config& c = m.c;
  const DecodeBatch& b = *m.batch;
  const DecodeRows& r = b.rows;
  const LayerSlots& ls = b.state->layer_slots(m.layer);
  cudaStream_t s = m.stream;
  int max_selected = 0;
  if (ratio > 0) {
    decode_compressor(
        decode_compressor_args(m, w.compressor, ls.comp, p.ckv, p.cgate, ratio, c.head_dim), r, s);
    if (ratio == 4) {
      decode_compressor(decode_compressor_args(m, w.index_compressor, ls.index, p.ikv, p.igate,
                                               ratio, c.index_head_dim),
                        r, s);
      m.mark(kCompressorsPhase);
      max_selected = c.index_topk;
      IndexerArgs a = indexer_args(m, p.iq, p.iw);
      a.num_queries = r.count;
      a.num_entries = b.max_tokens / 4;
      a.query_seq = r.slot;
      a.positions = r.pos;
      a.keys = ls.index.entries;
      indexer_scores(a, b.scores, s);
      indexer_topk_rows(b.scores, r.count, a.num_entries, r.pos, r.slot, 4, max_selected,
                        b.selected, b.num_selected, s);
      if (m.trace) m.record(m.trace->selected[m.layer], b.selected, b.real_rows * max_selected);
      m.mark(kIndexerPhase);
    } else {
      m.mark(kCompressorsPhase);
      max_selected = b.max_selected;
      decode_select_all(r, ratio, max_selected, b.selected, b.num_selected, s);
    }
  }
  SinkAttentionArgs a = sink_args(m, w);
  a.q = p.q;
  a.fresh = p.kv;  // each row's own key; the ring holds the positions before it
  a.split_partials = b.sink_partials;
  a.split_partials_floats = b.sink_partials_floats;
  a.ring_rows = ls.ring_rows;
  a.selected = ratio > 0 ? b.selected : nullptr;
  a.num_selected = ratio > 0 ? b.num_selected : nullptr;
  a.max_selected = max_selected;
  a.out = o;
  a.num_queries = r.count;
  a.query_seq = r.slot;
  a.positions = r.pos;
  a.rings = ls.ring;
  if (ratio > 0) a.entries = ls.comp.entries;
  sink_attention(a, s);
  decode_ring_write(p.kv, r, c.head_dim, ls, s);
}

}  // namespace

void attention_layer(const ForwardContext& m, const AttentionWeights& w, int ratio, const float* h,
                     const __nv_bfloat16* hb_in, int64_t rows, const int64_t* positions,
                     const std::vector<RowSegment>& segs, float* out) {
  const v4::Config& c = m.c;
  const int nh = c.num_heads, hd = c.head_dim, rd = c.rope_dim;
  const int ih = c.index_n_heads, ihd = c.index_head_dim;
  const int64_t H = c.hidden_size, ql = c.q_lora_rank, n = rows;
  const double* inv_freq = ratio > 0 ? m.compress_inv_freq : m.main_inv_freq;
  cudaStream_t s = m.stream;

  const __nv_bfloat16* hb = hb_in;
  if (!hb) {
    __nv_bfloat16* b = grow(m.s.hb, n * H);
    to_bf16(h, n * H, b, s);
    hb = b;
  }
  float* qr = grow(m.s.qr, n * ql);
  m.linear(w.wq_a, hb, n, ql, H, qr);
  __nv_bfloat16* qrb = grow(m.s.qrb, n * ql);
  rms_norm(qr, w.q_norm, n, ql, m.eps(), qrb, s);  // only its bf16 copy is read
  float* q = grow(m.s.q, n * nh * hd);
  m.linear(w.wq_b, qrb, n, int64_t(nh) * hd, ql, q);
  float* kv = grow(m.s.kv, n * hd);
  m.linear(w.wkv, hb, n, hd, H, kv);

  // q per head (unweighted), kv by kv_norm; both rotated: one launch.
  norm_rope({q, n * nh, nh, RowNorm::kPerWarp, nullptr}, {kv, n, 1, RowNorm::kPerBlock, w.kv_norm},
            hd, rd, positions, inv_freq, m.eps(), s);

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
  const Projected p{q, kv, ckv, cgate, ikv, igate, iq, iwt};
  m.mark("attention: projections");
  if (m.batch)
    batched_state(m, w, ratio, p, o);
  else
    for (const RowSegment& g : segs) segment_state(m, w, ratio, p, g, o);
  m.mark(ratio == 4  ? "attention: CSA sink attention (window + top-k entries), ring write"
         : ratio > 0 ? "attention: HCA sink attention (window + all entries), ring write"
                     : "attention: sliding sink attention (window), ring write");
  rope(o + hd - rd, n * nh, hd, rd, nh, positions, inv_freq, /*inverse=*/true, s);

  grouped_output(m.lin, m.s, w.wo_a, w.wo_b, o, n, c.o_groups, int64_t(nh / c.o_groups) * hd,
                 c.o_lora_rank, H, s, out);
  m.mark("attention: output projection");
}

void grouped_output(Linear& lin, ForwardScratch& sc, const DeviceMatrix& wo_a,
                    const DeviceMatrix& wo_b, const float* o, int64_t n, int groups, int64_t gin,
                    int ol, int64_t hidden, cudaStream_t s, float* out) {
  if (wo_a.rows != int64_t(groups) * ol || wo_a.cols != gin || wo_b.rows != hidden ||
      wo_b.cols != int64_t(groups) * ol) {
    std::fprintf(stderr, "cuda forward: wo_a/wo_b do not match the grouped output's dims\n");
    std::abort();
  }
  // Group g's heads (gin values) go through wo_a's g-th row block. Decode's rows: one grouped
  // launch over o as it lies, writing z's layout (Linear::run_grouped).
  if (lin.grouped_fits(wo_a, groups, n)) {
    __nv_bfloat16* ob = grow(sc.ob, n * groups * gin);
    to_bf16(o, n * groups * gin, ob, s);
    float* z = grow(sc.z, n * groups * ol);
    lin.run_grouped(wo_a, groups, ob, z, n, s);
    __nv_bfloat16* zb = grow(sc.zb, n * groups * ol);
    to_bf16(z, n * groups * ol, zb, s);
    lin.run(wo_b, zb, out, n, s);
    return;
  }
  __nv_bfloat16* ob = grow(sc.ob, n * groups * gin);
  split_groups_bf16(o, n, groups, gin, ob, s);
  float* zg = grow(sc.zg, n * groups * ol);
  for (int gg = 0; gg < groups; ++gg)
    lin.run(wo_a.row_slice(int64_t(gg) * ol, ol), ob + gg * n * gin, zg + gg * n * ol, n, s);
  __nv_bfloat16* zb = grow(sc.zb, n * groups * ol);
  merge_groups_bf16(zg, n, groups, ol, zb, s);
  lin.run(wo_b, zb, out, n, s);
}

}  // namespace deepinfer::cuda

// Compressor on the GPU (spec §6.6): the projections as two GEMMs over all rows (every sequence
// of a batch at once), then per sequence every window its rows complete pooled in one launch and
// appended to the sequence's token pages, instead of the CPU's per-token push; the unfinished
// window and the CSA overlap halves stay in its constant pages.
#include "deepinfer/backend/cuda/attention/rope.h"
#include "deepinfer/backend/cuda/compressor/compressor_pool.h"
#include "deepinfer/backend/cuda/norm/rms_norm.h"
#include "deepinfer/runtime/cuda/forward/forward_context.h"
#include "deepinfer/runtime/cuda/forward/forward_kernels.h"

namespace deepinfer::cuda {

void compressor_project(const ForwardContext& m, const CompressorWeights& w, int width,
                        const __nv_bfloat16* hb, int64_t n, float* kv, float* gate) {
  m.linear(w.wkv, hb, n, width, m.c.hidden_size, kv);
  m.linear(w.wgate, hb, n, width, m.c.hidden_size, gate);
}

namespace {

CompressorChunk chunk_of(const CompressorWeights& w, const CompressorView& s, const float* kv,
                         const float* gate, int64_t n, int64_t pos0) {
  CompressorChunk ch;
  ch.kv = kv;
  ch.gate = gate;
  ch.ape = w.ape;
  ch.pending_kv = s.pending_kv;
  ch.pending_gate = s.pending_gate;
  ch.prev_kv = s.prev_kv;
  ch.prev_gate = s.prev_gate;
  ch.pos0 = pos0;
  ch.n = n;
  ch.ratio = s.ratio;
  ch.width = s.width;
  ch.dim = s.dim;
  return ch;
}

}  // namespace

void compressor_advance_state(const CompressorWeights& w, const CompressorView& s, const float* kv,
                              const float* gate, int64_t n, int64_t pos0, cudaStream_t stream) {
  compressor_advance(chunk_of(w, s, kv, gate, n, pos0), stream);
}

void compressor_update(const ForwardContext& m, const CompressorWeights& w, const CompressorView& s,
                       const float* kv, const float* gate, int64_t n, int64_t pos0) {
  const CompressorChunk ch = chunk_of(w, s, kv, gate, n, pos0);
  const int64_t windows = ch.windows();
  if (windows > 0) {
    const int64_t e0 = ch.first_entry();
    const size_t slots = size_t(windows) * ch.slots() * s.dim;
    float* win_kv = grow(m.s.win_kv, slots);
    float* win_gate = grow(m.s.win_gate, slots);
    compressor_windows(ch, win_kv, win_gate, m.stream);
    // Pooled, normalized and rotated in scratch, then stored into the token pages.
    float* dst = grow(m.s.new_entries, size_t(windows) * s.dim);
    compressor_pool(win_kv, win_gate, windows, ch.slots(), s.dim, dst, m.stream);
    rms_norm(dst, w.norm, windows, s.dim, m.eps(), dst, m.stream);
    // Entry e is rotated at its window's first position, e * ratio.
    int64_t* pos = grow(m.s.entry_positions, windows);
    fill_positions(pos, windows, e0 * s.ratio, s.ratio, m.stream);
    rope(dst + s.dim - m.c.rope_dim, windows, s.dim, m.c.rope_dim, 1, pos, m.compress_inv_freq,
         /*inverse=*/false, m.stream);
    store_entries(dst, windows, e0, s.entries, m.stream);
  }
  compressor_advance(ch, m.stream);
}

}  // namespace deepinfer::cuda

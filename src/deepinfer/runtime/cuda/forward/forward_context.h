// What every sub-layer of the GPU forward reads (config, GEMM and MoE runners, RoPE tables, the
// stream) and the scratch it writes; each sub-layer gets its weights as resolved pointers
// (layer_weights.h). Scratch grows on demand to the largest chunk seen and is then reused, so
// steady-state decode allocates nothing on the device; a new, larger chunk reallocates (and
// implicitly synchronizes) once.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/gemm/gemm.h"
#include "deepinfer/backend/cuda/gemm/linear.h"
#include "deepinfer/backend/cuda/mhc/mhc.h"
#include "deepinfer/backend/cuda/moe/experts.h"
#include "deepinfer/model/deepseek_v4/config.h"
#include "deepinfer/runtime/cuda/forward/cuda_model.h"
#include "deepinfer/runtime/cuda/forward/decode_kernels.h"
#include "deepinfer/runtime/cuda/forward/layer_weights.h"
#include "deepinfer/runtime/cuda/forward/paged_state.h"
#include "deepinfer/runtime/cuda/forward/phase_timer.h"

namespace deepinfer::cuda {

// y[n, out] = W x through lin, W in its stored format; xb is the bf16 copy of x the caller made.
// out and in are what the caller's dims say W is: a mismatch with the loaded matrix is a bug
// (both families' forwards call this).
inline void checked_linear(Linear& lin, const DeviceMatrix& w, const __nv_bfloat16* xb, int64_t n,
                           int64_t out, int64_t in, float* y, cudaStream_t stream) {
  if (w.rows != out || w.cols != in) {
    std::fprintf(stderr,
                 "cuda forward: a projection is %lld x %lld, the caller expects %lld x %lld\n",
                 static_cast<long long>(w.rows), static_cast<long long>(w.cols),
                 static_cast<long long>(out), static_cast<long long>(in));
    std::abort();
  }
  lin.run(w, xb, y, n, stream);
}

struct ForwardScratch {
  DeviceBuffer<float> y, post, comb, f, hc_partials;  // mHC around each sub-layer
  DeviceBuffer<__nv_bfloat16> hb, qrb, ob, zb;        // bf16 GEMM inputs
  DeviceBuffer<float> qr, q, kv, o, zg, z;            // attention
  DeviceBuffer<float> ckv, cgate, ikv, igate;         // compressor projections (attention, index)
  DeviceBuffer<float> win_kv, win_gate, new_entries;  // compressor windows and their entries
  DeviceBuffer<float> qi, wi, scores;                 // indexer
  DeviceBuffer<int32_t> selected, num_selected;       // attended entries
  DeviceBuffer<int64_t> positions, entry_positions;   // RoPE positions
  DeviceBuffer<float> router, route_w;                // MoE
  DeviceBuffer<int32_t> route_ids, token_ids;
  MoeArgs moe;  // its expert list keeps its capacity, so refilling it per layer doesn't allocate
};

// An mHC site's arguments for `tokens` rows of hw, under either family's config (the same field
// names: V4's rms_norm_eps is 1e-6, V4.1's its own), its partial sums in s.hc_partials.
template <typename Config>
HcArgs hc_site_args(const Config& c, const HcWeights& hw, int64_t tokens, ForwardScratch& s) {
  HcArgs a;
  a.fn = hw.fn;
  a.base = hw.base;
  a.scale = hw.scale;
  a.tokens = tokens;
  a.hidden = c.hidden_size;
  a.hc = c.hc_mult;
  a.sinkhorn_iters = c.hc_sinkhorn_iters;
  a.norm_eps = static_cast<float>(c.rms_norm_eps);
  a.hc_eps = static_cast<float>(c.hc_eps);
  a.partials = grow(s.hc_partials, hc_scratch_floats(tokens, c.hc_mult, c.hidden_size));
  return a;
}

// A batched decode step: one row per sequence, every size fixed by the row count (the graph
// bucket) and max_tokens, every per-step value (position, token, the row's pages) in device
// memory, so the whole step can be captured in a CUDA graph and replayed. Rows past real_rows
// are padding.
struct DecodeBatch {
  DecodeRows rows;
  int64_t real_rows = 0;              // tests' decision traces record these only
  const PagedState* state = nullptr;  // its layer_slots(): the rows' tables
  int64_t max_tokens = 0;             // bounds every row's visible entries
  float* scores = nullptr;            // [rows, max_tokens / 4] indexer scores
  int32_t* selected = nullptr;        // [rows, max_selected]
  int32_t* num_selected = nullptr;    // [rows]
  int max_selected = 0;               // max(index_topk, max_tokens / the smallest HCA ratio)
  float* sink_partials = nullptr;     // the split sink attention's scratch (sink_attention.h)
  int64_t sink_partials_floats = 0;
};

struct ForwardContext {
  const v4::Config& c;
  Gemm& gemm;  // the fp32 router
  Linear& lin;
  MoeRunner& moe;
  ForwardScratch& s;
  const double* main_inv_freq;      // device, rope_dim / 2
  const double* compress_inv_freq;  // device, YaRN
  bool clamp_shared_expert;
  cudaStream_t stream;
  DecisionTrace* trace = nullptr;      // tests only
  int layer = 0;                       // the block being run
  const DecodeBatch* batch = nullptr;  // set: a batched decode step (graph-safe ops only)
  PhaseTimer* timer = nullptr;         // set: phases are timed (eager launches only)

  // The work launched since the previous mark was `phase`.
  void mark(const char* phase) const {
    if (timer) timer->mark(phase, stream);
  }

  // Appends count device ints to v (tests only: synchronous).
  void record(std::vector<int32_t>& v, const int32_t* dev, int64_t count) const {
    const size_t at = v.size();
    v.resize(at + count);
    DI_CUDA_CHECK(cudaMemcpyAsync(v.data() + at, dev, count * 4, cudaMemcpyDeviceToHost, stream));
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  float eps() const { return static_cast<float>(c.rms_norm_eps); }
  // y[n, out] = W x, W in its stored format; xb is the bf16 copy of x the caller made. out and
  // in are what the caller's dims say W is: a mismatch with the loaded matrix is a bug.
  void linear(const DeviceMatrix& w, const __nv_bfloat16* xb, int64_t n, int64_t out, int64_t in,
              float* y) const {
    checked_linear(lin, w, xb, n, out, in, y, stream);
  }
};

// Consecutive rows [row0, row0 + n) of a forward call that belong to one sequence, at its
// positions pos0..: a prefill chunk is one segment, a batched decode step one per sequence.
struct RowSegment {
  int64_t row0 = 0, n = 0, pos0 = 0;
  const SegmentState* seq = nullptr;
  const std::vector<SegmentSnapshot>* snapshots = nullptr;  // prefill: those ending in it
};

// Attention sub-layer (spec §6.5-6.7) over `rows` rows: h [rows, hidden] -> out [rows, hidden];
// hb: h rounded to bf16 already (hc_pre's copy), or null to round it here; positions (device,
// rows) are each row's position. Projections, norms and RoPE run over all rows; compressors,
// indexer, ring and sink attention per segment, updating that sequence's state for layer
// m.layer.
void attention_layer(const ForwardContext& m, const AttentionWeights& w, int ratio, const float* h,
                     const __nv_bfloat16* hb, int64_t rows, const int64_t* positions,
                     const std::vector<RowSegment>& segs, float* out);

// The grouped output projection (spec §6.7): o [n, groups, gin] -> z = per-group wo_a
// ([groups * ol, gin] row blocks) -> out [n, hidden] = wo_b z. Both families.
void grouped_output(Linear& lin, ForwardScratch& sc, const DeviceMatrix& wo_a,
                    const DeviceMatrix& wo_b, const float* o, int64_t n, int groups, int64_t gin,
                    int ol, int64_t hidden, cudaStream_t s, float* out);

// A compressor's two projections over n rows (hb: bf16 hidden states): kv, gate [n, width].
void compressor_project(const ForwardContext& m, const CompressorWeights& w, int width,
                        const __nv_bfloat16* hb, int64_t n, float* kv, float* gate);
// Feeds one sequence's n projected rows at pos0.. to its compressor; entries they complete are
// appended, normalized and rotated (spec §6.6).
void compressor_update(const ForwardContext& m, const CompressorWeights& w, const CompressorView& s,
                       const float* kv, const float* gate, int64_t n, int64_t pos0);
// Only the state part of that: s's unfinished window and CSA overlap halves moved past the rows
// (a snapshot's copy; the entries are the sequence's, stored by compressor_update).
void compressor_advance_state(const CompressorWeights& w, const CompressorView& s, const float* kv,
                              const float* gate, int64_t n, int64_t pos0, cudaStream_t stream);

// What a MoE sub-layer computes, for either family.
struct MoeSpec {
  int64_t hidden = 0, inter = 0, shared_inter = 0;  // shared_inter 0: no shared expert
  int experts = 0, top_k = 0;
  float route_scale = 1.0f, temperature = 1.0f, swiglu_limit = 0.0f;
  bool normalize = true, clamp_shared = true, weight_before_w2 = false;
};
// Where it runs. graph_safe: device-side grouping only (a batched decode step). routed, when
// set, sees the device expert ids right after routing (traces, phase marks).
struct MoeCall {
  Gemm& gemm;
  MoeRunner& moe;
  ForwardScratch& s;
  cudaStream_t stream;
  bool graph_safe = false;
  std::function<void(const int32_t*)> routed;
  const __nv_bfloat16* hb = nullptr;  // h rounded to bf16 already (hc_pre's copy), or null
};
// Router, routing and experts over h [n, hidden] into out; token ids on the device (hash layers).
void run_moe(const MoeSpec& spec, const MoeCall& call, const MoeWeights& w, bool hash,
             const float* h, const int32_t* token_ids, int64_t n, float* out);

// MoE sub-layer (spec §6.8): h [n, hidden] (hb: its bf16 copy, or null), token ids on the
// device (hash layers).
void moe_layer(const ForwardContext& m, const MoeWeights& w, bool hash, const float* h,
               const __nv_bfloat16* hb, const int32_t* token_ids, int64_t n, float* out);

}  // namespace deepinfer::cuda

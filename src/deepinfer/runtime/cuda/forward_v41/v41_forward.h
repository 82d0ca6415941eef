// What every sub-layer of the deepseek_v41 GPU forward reads and writes within one forward call:
// the config, GEMM and MoE runners, RoPE tables, the stream, the scratch, and the row segments
// (one per sequence: a prefill chunk, or one decode row each) with their resolved state. The
// latest index source's picks and the candidate source's kept blocks live in the scratch for the
// whole call, per row, as transformers' per-forward `shared` dict.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/mhc/mhc.h"
#include "deepinfer/model/deepseek_v41/config.h"
#include "deepinfer/runtime/cuda/forward/forward_context.h"  // ForwardScratch, run_moe
#include "deepinfer/runtime/cuda/forward_v41/v41_layer_weights.h"
#include "deepinfer/runtime/cuda/forward_v41/v41_paged_state.h"

namespace deepinfer::cuda::v41f {

struct V41Scratch {
  ForwardScratch s;                   // shared with deepseek_v4's forward: projections, norms, MoE
  DeviceBuffer<float> pre;            // [rows, hc]: the latest mHC site's pre
  DeviceBuffer<float> latents, keys;  // a KV source's completed groups
  DeviceBuffer<float> group_kv, group_gate;  // pending rows + the segment's, contiguous
  DeviceBuffer<float> engram_emb, engram_kv;
  DeviceBuffer<__nv_bfloat16> engram_b, latents_b;
  DeviceBuffer<uint8_t> keep;  // [rows, max_blocks]: the candidate source's kept blocks
};

// Rows [row0, row0 + n) of the call belong to one sequence at positions pos0...
struct V41Segment {
  int64_t row0 = 0, n = 0, pos0 = 0;
  const V41SequenceView* seq = nullptr;
};

// Tests: how close each row's discrete choices came to going the other way, as the smallest
// relative gap (between the last chosen and the first rejected candidate, over the largest
// |candidate|) over every choice the row made in one call: index picks, candidate blocks,
// routed experts. A bf16 GPU may legitimately choose differently from the CPU at a near-tie.
struct V41Trace {
  std::vector<double> gap;  // per row of the latest call; +inf: nothing was close
};

struct V41Context {
  const v41::Config& c;
  Gemm& gemm;
  Linear& lin;
  MoeRunner& moe;
  V41Scratch& x;
  const double* main_inv_freq;      // device, rope_dim / 2
  const double* compress_inv_freq;  // device (YaRN)
  cudaStream_t stream;
  const std::vector<V41Segment>& segs;
  int64_t rows = 0;                    // rows of the call
  const int64_t* positions = nullptr;  // device [rows]
  int max_blocks = 0;                  // keep's row stride
  V41Trace* trace = nullptr;           // tests: record decision gaps (synchronous copies)
  // This context's row 0 is row pick_row0 of the call's picks (a YOCO-trimmed layer runs the
  // call's last rows only, and reads their picks).
  int64_t pick_row0 = 0;

  float eps() const { return static_cast<float>(c.rms_norm_eps); }
  void linear(const DeviceMatrix& w, const __nv_bfloat16* xb, int64_t n, int64_t out, int64_t in,
              float* y) const;
};

// Tests: lowers trace->gap[row0 + t] by the top-k gap of each of n rows of scores ([n, stride],
// the first visible[t] of row t valid; -inf masked), keeping `top` of them.
void trace_topk_gaps(const V41Context& m, const float* dev_scores, int64_t n, int64_t stride,
                     const std::vector<int64_t>& visible, int64_t top, int64_t row0,
                     int block_size = 1);

// The MoE of a V4.1 block, or of a DSpark stage with its own expert count and top-k.
MoeSpec v41_moe_spec(const v41::Config& c, int experts, int top_k);

// The projections every V4.1 attention (a block's or a DSpark stage's) starts with, over m.rows
// rows of h at m.positions (spec §11.2.2): q = RoPE(wq_b q_norm(wq_a h)) [rows, heads, head_dim],
// kv = FP8-rounded RoPE(kv_norm(wkv h)) [rows, head_dim], in m's scratch, with the bf16 inputs
// later projections of the same rows read.
struct QueryKv {
  float *q = nullptr, *kv = nullptr;
  const __nv_bfloat16 *hb = nullptr, *qrb = nullptr;
};
QueryKv v41_query_kv(const V41Context& m, const V41Attention& w, const float* h,
                     const double* inv_freq);

// Attention sub-layer of `layer` over every row (spec §11.2.2-5): h [rows, hidden] -> out.
void v41_attention(const V41Context& m, int layer, const V41Attention& w, const float* h,
                   float* out);

}  // namespace deepinfer::cuda::v41f

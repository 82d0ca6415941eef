// What every sub-layer of the V4.1 CPU forward reads (config, weights, RoPE tables), what travels
// from layer to layer within one forward call (the latest top-k picks and candidate blocks,
// transformers' per-forward `shared` dict), and the sub-layer entry points.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "deepinfer/backend/collective.h"
#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/rope.h"
#include "deepinfer/model/deepseek_v4/weights.h"
#include "deepinfer/model/deepseek_v41/config.h"
#include "deepinfer/model/deepseek_v41/sequence_state.h"
#include "deepinfer/model/eplb/expert_placement.h"
#include "deepinfer/model/eplb/routed_counts.h"

namespace deepinfer::v41 {

struct ModelContext {
  const Config& c;
  const v4::Weights& w;
  v4::RopeTable main_rope, compress_rope;
  // Expert parallelism (expert_parallel_moe.h): the group whose ranks own the main layers'
  // routed experts e with e % size == rank (or as `placement` says); null: every expert is here.
  Collective* expert_group = nullptr;
  const ExpertPlacement* placement = nullptr;   // EPLB's plan; null: e % size
  const RoutedCounts* routed_counts = nullptr;  // the main layers' picks are counted here
  // Two-batch overlap of the MoE exchange (ModelOptions::two_batch_overlap).
  bool two_batch_overlap = true;

  const v4::RopeTable& rope_for(int ratio) const { return ratio > 0 ? compress_rope : main_rope; }
  const float* f(const std::string& name) const { return w.f(name); }
  float eps() const { return static_cast<float>(c.rms_norm_eps); }
};

// Per-forward, per token of the chunk. An index source overwrites `picks`; the rest of its group
// reuses them. The candidate source writes `candidate_blocks`; later index sources of its group
// score only inside them.
struct ForwardShared {
  std::vector<std::vector<int64_t>> picks;             // compressed entries attended, ascending
  std::vector<std::vector<uint8_t>> candidate_blocks;  // per block: kept (level one)
  bool has_candidates = false;
};

// "layers.{l}."
std::string layer_prefix(int layer);

// The KV source's compressor (spec §11.2.2) over n tokens at positions s.num_tokens...: carries
// the unfinished group, and appends one compressed entry (RoPE at t * ratio, FP4) and one indexer
// key (wk, k_norm, RoPE, FP4) per group the chunk completes.
void compressor_forward(const ModelContext& m, int layer, const float* h, int64_t n,
                        KvSourceState& s);

// An index source (spec §11.2.3-4): per token, the top index_topk visible entries of `src` by
// sum_h w_h relu(q_h . k_t), inside the candidate blocks when the layer uses them; the candidate
// source also picks its blocks. qr = q_norm(wq_a h); h = attention input.
void indexer_forward(const ModelContext& m, int layer, const KvSourceState& src, const float* qr,
                     const float* h, int64_t n, int64_t pos0, ForwardShared& shared);

// The attention pieces of block `prefix` ("layers.3.", "mtp.0.") for n rows at positions pos0...
// that the backbone and the DSpark stages share. Query: qr = q_norm(wq_a h) [n, q_lora_rank],
// q = RoPE(wq_b qr) [n, heads, head_dim] (no per-head norm).
void attention_query(const ModelContext& m, const std::string& prefix, const v4::RopeTable& rope,
                     const float* h, int64_t n, int64_t pos0, float* qr, float* q);
// The window K=V rows [n, head_dim]: kv_norm(wkv h), RoPE, FP8-rounded as they are cached.
void attention_window_kv(const ModelContext& m, const std::string& prefix,
                         const v4::RopeTable& rope, const float* h, int64_t n, int64_t pos0,
                         float* kv);
// The output projection of the de-rotated heads o [n, heads, head_dim]: grouped wo_a, then wo_b.
void attention_output(const ModelContext& m, const std::string& prefix, const float* o, int64_t n,
                      float* out);

// Attention sub-layer for n tokens at positions pos0...: sliding window plus the group's picked
// compressed entries, one softmax with the per-head sink. Updates the layer's ring and, at a KV
// source, its compressed branch. The tokens are rows [row0, row0 + n) of the forward (`shared`
// is indexed by forward row): a YOCO-trimmed trailing layer starts past row 0 (yoco_rows.h).
void attention_forward(const ModelContext& m, int layer, const float* h, int64_t n, int64_t pos0,
                       SequenceState& st, ForwardShared& shared, float* out, int64_t row0 = 0);

// MoE sub-layer for n tokens (spec §11.2.6): biased top-k routing, weights from the unbiased
// sqrtsoftplus scores, SwiGLU experts and the clamped shared expert.
void moe_forward(const ModelContext& m, int layer, const float* h, int64_t n, float* out);
// The same with the routed experts spread over m.expert_group (collective: every rank calls it
// per MoE layer of every forward, n >= 0); bitwise moe_forward's result.
Status moe_forward_ep(const ModelContext& m, int layer, const float* h, int64_t n, float* out);
// Routing of one token under `p` ("layers.3.ffn."): idx/wts (K each) get the picked experts and
// their weights in the order moe_forward adds them (expert id order, as transformers does).
// z: the gate logits already divided by gate_temp.
void route_in_sum_order(const ModelContext& m, const std::string& p, int E, int K, const float* z,
                        int* idx, float* wts);
// One SwiGLU expert (weights under p) on one token h, its weighted output added into acc.
void expert_into(const ModelContext& m, const std::string& p, int64_t inter, const float* h,
                 float weight, float* acc);
// The same for the MoE under `prefix` ("mtp.0.ffn.") with its own expert count and top-k.
void moe_forward(const ModelContext& m, const std::string& prefix, int n_experts, int top_k,
                 const float* h, int64_t n, float* out);

// One deferred-mHC site (spec §11.2.1) of block `prefix`, `site` "attn" or "ffn", over rows
// [t0, n) of X [n, hc_mult, hidden]: the site's (pre, post, comb) come from X; X collapses with
// `pre` (the previous site's, [n, hc_mult]) and is normalized by the site's norm; `pre` then
// holds this site's own; sublayer(y, rows, f) maps the rows, and f expands back into X.
using Sublayer = std::function<void(const float* y, int64_t rows, float* f)>;
void mhc_sublayer(const ModelContext& m, const std::string& prefix, const std::string& site,
                  float* X, float* pre, int64_t t0, int64_t n, const Sublayer& sublayer);

}  // namespace deepinfer::v41

#include "deepinfer/cli/cuda_bench/roofline_v41.h"

#include <algorithm>
#include <memory>

#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/model/deepseek_v41/weights.h"

namespace deepinfer::cli {

StatusOr<RooflineV41> RooflineV41::open(const std::string& dir, const v41::Config& c) {
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt, Checkpoint::open(dir));
  ASSIGN_OR_RETURN(std::vector<v41::WeightSource> sources, v41::resolve_weights(*ckpt, c));
  RooflineV41 r;
  r.c_ = c;
  for (const v41::WeightSource& s : sources) {
    const std::string& n = s.spec.name;
    if (n.rfind("mtp.", 0) == 0) continue;                      // the DSpark stages
    if (n.find("engram.embed") != std::string::npos) continue;  // gathered rows: shape()
    r.w_.add(n, double(s.stored_bytes()), double(s.numel()), s.spec.shape.size() == 2);
  }
  r.w_.finish(c.vocab_size, c.n_routed_experts);
  return r;
}

void RooflineV41::attention(int l, int64_t pos, double* flops, double* bytes) const {
  const double heads = c_.num_heads, hd = c_.head_dim;
  const v41::LayerRoles& role = c_.layers[l];
  double keys = double(std::min<int64_t>(pos + 1, c_.sliding_window));
  double read = keys * hd;
  if (role.compress_ratio > 0) {
    const double entries = double((pos + 1) / role.compress_ratio);
    const double attended = std::min<double>(entries, c_.index_topk);
    keys += attended;
    read += attended * hd;
    if (role.index == v41::IndexRole::kSource || role.index == v41::IndexRole::kReindex) {
      const double candidates = double(c_.candidate_topk_blocks) * c_.candidate_block_size;
      const double scored = role.uses_candidates ? std::min(entries, candidates) : entries;
      *flops += 2.0 * c_.index_n_heads * c_.index_head_dim * scored;
      read += scored * c_.index_head_dim;
    }
  }
  *flops += 4.0 * heads * hd * keys;  // q.k and p.v
  *bytes += read * kStateBytes;
}

StepShape RooflineV41::shape() const {
  StepShape s;
  s.num_layers = c_.num_layers;
  s.routed_experts = c_.n_routed_experts;
  s.experts_per_token = c_.experts_per_token;
  // Per Engram layer a token reads one FP8 row of head_dim per (n-gram order, head).
  s.extra_token_bytes = double(c_.engram.layer_ids.size()) * (c_.engram.max_ngram_size - 1) *
                        c_.engram.n_heads * c_.engram.head_dim;
  s.attention = [this](int l, int64_t pos, double* f, double* b) { attention(l, pos, f, b); };
  s.written_per_token = [this](int l) {  // the window row; a KV source's entry and indexer key
    const v41::LayerRoles& role = c_.layers[l];
    double written = c_.head_dim;
    if (role.kv == v41::KvRole::kSource)
      written += double(c_.head_dim + c_.index_head_dim) / role.compress_ratio;
    return written;
  };
  return s;
}

StepFloor RooflineV41::decode(int64_t batch, int64_t context) const {
  return decode_floor(w_, shape(), batch, context);
}

StepFloor RooflineV41::prefill(int64_t tokens) const { return prefill_floor(w_, shape(), tokens); }

}  // namespace deepinfer::cli

#include "deepinfer/cli/cuda_bench/roofline.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/model/deepseek_v4/weights.h"

namespace deepinfer::cli {
namespace {

bool contains(const std::string& s, const char* p) { return s.find(p) != std::string::npos; }

}  // namespace

double StepFloor::seconds(const Hardware& hw) const {
  return std::max((weight_bytes + state_bytes) / hw.bytes_per_s, flops / hw.flops_per_s);
}

double experts_touched(double experts, double per_token, double tokens) {
  return experts > 0 ? experts * (1 - std::pow(1 - per_token / experts, tokens)) : 0;
}

void WeightTally::add(const std::string& n, double bytes, double params, bool matrix) {
  const bool matmul = matrix && contains(n, ".weight");
  if (n == "embed.weight") {
    embed_row_bytes = bytes;  // divided by the vocabulary in finish()
  } else if (contains(n, ".ffn.experts.")) {
    expert_bytes_all_ += bytes;
    expert_params_all_ += params;
  } else {
    dense_bytes += bytes;
    if (n == "head.weight")
      head_params = params;
    else if (matmul)
      dense_params += params;
  }
  if (contains(n, ".ffn.gate.weight")) ++moe_layers_;
}

void WeightTally::finish(int64_t vocab, int routed_experts) {
  embed_row_bytes /= double(vocab);
  const double experts = double(moe_layers_) * routed_experts;
  expert_bytes = experts > 0 ? expert_bytes_all_ / experts : 0;
  expert_params = experts > 0 ? expert_params_all_ / experts : 0;
}

StepFloor decode_floor(const WeightTally& w, const StepShape& s, int64_t batch, int64_t context) {
  StepFloor f;
  const double B = double(batch);
  f.weight_bytes = w.dense_bytes + B * (w.embed_row_bytes + s.extra_token_bytes);
  for (int l = 0; l < s.num_layers; ++l) {
    f.weight_bytes += experts_touched(s.routed_experts, s.experts_per_token, B) * w.expert_bytes;
    double fl = 0, by = 0;
    s.attention(l, context, &fl, &by);
    f.flops += B * fl;
    f.state_bytes += B * by;
  }
  const double layers_k = double(s.num_layers) * s.experts_per_token;
  f.flops += 2.0 * B * (w.dense_params + layers_k * w.expert_params + w.head_params);
  return f;
}

StepFloor prefill_floor(const WeightTally& w, const StepShape& s, int64_t tokens) {
  StepFloor f;
  const double T = double(tokens);
  f.weight_bytes = w.dense_bytes + T * (w.embed_row_bytes + s.extra_token_bytes);
  for (int l = 0; l < s.num_layers; ++l) {
    f.weight_bytes += experts_touched(s.routed_experts, s.experts_per_token, T) * w.expert_bytes;
    // Attention reads come from on-chip tiles in a fused prefill; the floor counts the state
    // written once (window KV and compressed entries), and every product.
    for (int64_t p = 0; p < tokens; ++p) {
      double by = 0;
      s.attention(l, p, &f.flops, &by);
    }
    f.state_bytes += T * s.written_per_token(l) * kStateBytes;
  }
  const double layers_k = double(s.num_layers) * s.experts_per_token;
  f.flops += 2.0 * T * (w.dense_params + layers_k * w.expert_params) + 2.0 * w.head_params;
  return f;
}

StatusOr<Roofline> Roofline::open(const std::string& dir, const v4::Config& c) {
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt, Checkpoint::open(dir));
  ASSIGN_OR_RETURN(std::vector<v4::WeightSource> sources, v4::resolve_weights(*ckpt, c));
  Roofline r;
  r.c_ = c;
  for (const v4::WeightSource& s : sources) {
    const std::string& n = s.spec.name;
    if (n.rfind("mtp.", 0) == 0) continue;
    if (contains(n, "tid2eid")) continue;  // B rows of a lookup table: negligible
    r.w_.add(n, double(s.stored_bytes()), double(s.numel()), s.spec.shape.size() == 2);
  }
  r.w_.finish(c.vocab_size, c.n_routed_experts);
  return r;
}

void Roofline::attention(int l, int64_t pos, double* flops, double* bytes) const {
  const double heads = c_.num_heads, hd = c_.head_dim;
  const int ratio = c_.compress_ratio(l);
  double keys = double(std::min<int64_t>(pos + 1, c_.sliding_window));
  double read = keys * hd;
  if (ratio > 0) {
    const double entries = double((pos + 1) / ratio);
    const double attended = ratio == 4 ? std::min<double>(entries, c_.index_topk) : entries;
    keys += attended;
    read += attended * hd;
    if (ratio == 4) {  // the indexer scores every visible indexer key with every index head
      *flops += 2.0 * c_.index_n_heads * c_.index_head_dim * entries;
      read += entries * c_.index_head_dim;
    }
  }
  *flops += 4.0 * heads * hd * keys;  // q.k and p.v
  *bytes += read * kStateBytes;
}

StepShape Roofline::shape() const {
  StepShape s;
  s.num_layers = c_.num_layers;
  s.routed_experts = c_.n_routed_experts;
  s.experts_per_token = c_.experts_per_token;
  s.attention = [this](int l, int64_t pos, double* f, double* b) { attention(l, pos, f, b); };
  s.written_per_token = [this](int l) {
    const int ratio = c_.compress_ratio(l);
    double written = c_.head_dim;
    if (ratio > 0) written += double(c_.head_dim) / ratio;
    if (ratio == 4) written += double(c_.index_head_dim) / ratio;
    return written;
  };
  return s;
}

StepFloor Roofline::decode(int64_t batch, int64_t context) const {
  return decode_floor(w_, shape(), batch, context);
}

StepFloor Roofline::prefill(int64_t tokens) const { return prefill_floor(w_, shape(), tokens); }

}  // namespace deepinfer::cli

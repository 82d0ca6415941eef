#include "deepinfer/cli/cuda_bench/roofline.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/model/deepseek_v4/weights.h"

namespace deepinfer::cli {
namespace {

constexpr double kStateBytes = 2;  // bf16 KV, compressed entries and indexer keys

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }
bool contains(const std::string& s, const char* p) { return s.find(p) != std::string::npos; }

}  // namespace

double StepFloor::seconds(const Hardware& hw) const {
  return std::max((weight_bytes + state_bytes) / hw.bytes_per_s, flops / hw.flops_per_s);
}

StatusOr<Roofline> Roofline::open(const std::string& dir, const v4::Config& c) {
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt, Checkpoint::open(dir));
  ASSIGN_OR_RETURN(std::vector<v4::WeightSource> sources, v4::resolve_weights(*ckpt, c));
  Roofline r;
  r.c_ = c;
  double expert_bytes_all = 0, expert_params_all = 0;
  int moe_layers = 0;
  for (const v4::WeightSource& s : sources) {
    const std::string& n = s.spec.name;
    if (starts_with(n, "mtp.")) continue;
    const double bytes = double(s.stored_bytes());
    const double params = double(s.numel());
    const bool matmul = s.spec.shape.size() == 2 && contains(n, ".weight");
    if (contains(n, "tid2eid")) continue;  // B rows of a lookup table: negligible
    if (n == "embed.weight") {
      r.embed_row_bytes_ = bytes / double(c.vocab_size);
    } else if (contains(n, ".ffn.experts.")) {
      expert_bytes_all += bytes;
      expert_params_all += params;
    } else {
      r.dense_bytes_ += bytes;
      if (n == "head.weight")
        r.head_params_ = params;
      else if (matmul)
        r.dense_params_ += params;
    }
    if (contains(n, ".ffn.gate.weight")) ++moe_layers;
  }
  const double experts = double(moe_layers) * c.n_routed_experts;
  r.expert_bytes_ = experts > 0 ? expert_bytes_all / experts : 0;
  r.expert_params_ = experts > 0 ? expert_params_all / experts : 0;
  return r;
}

double Roofline::experts_touched(double tokens) const {
  const double E = c_.n_routed_experts, K = c_.experts_per_token;
  return E * (1 - std::pow(1 - K / E, tokens));
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

StepFloor Roofline::decode(int64_t batch, int64_t context) const {
  StepFloor f;
  const double B = double(batch);
  f.weight_bytes = dense_bytes_ + B * embed_row_bytes_;
  for (int l = 0; l < c_.num_layers; ++l) {
    f.weight_bytes += experts_touched(B * 1.0) * expert_bytes_;
    double fl = 0, by = 0;
    attention(l, context, &fl, &by);
    f.flops += B * fl;
    f.state_bytes += B * by;
  }
  const double layers_k = double(c_.num_layers) * c_.experts_per_token;
  f.flops += 2.0 * B * (dense_params_ + layers_k * expert_params_ + head_params_);
  return f;
}

StepFloor Roofline::prefill(int64_t tokens) const {
  StepFloor f;
  const double T = double(tokens);
  f.weight_bytes = dense_bytes_ + T * embed_row_bytes_;
  for (int l = 0; l < c_.num_layers; ++l) {
    f.weight_bytes += experts_touched(T) * expert_bytes_;
    // Attention reads come from on-chip tiles in a fused prefill; the floor counts the state
    // written once (window KV and compressed entries), and every product.
    for (int64_t p = 0; p < tokens; ++p) {
      double by = 0;
      attention(l, p, &f.flops, &by);
    }
    const int ratio = c_.compress_ratio(l);
    double written = T * c_.head_dim;
    if (ratio > 0) written += (T / ratio) * c_.head_dim;
    if (ratio == 4) written += (T / ratio) * c_.index_head_dim;
    f.state_bytes += written * kStateBytes;
  }
  const double layers_k = double(c_.num_layers) * c_.experts_per_token;
  f.flops += 2.0 * T * (dense_params_ + layers_k * expert_params_) + 2.0 * head_params_;
  return f;
}

}  // namespace deepinfer::cli

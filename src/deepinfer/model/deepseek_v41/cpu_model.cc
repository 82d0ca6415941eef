#include "deepinfer/model/deepseek_v41/cpu_model.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/model/deepseek_v4/expert_parallel_moe.h"
#include "deepinfer/model/deepseek_v4/mhc.h"
#include "deepinfer/model/deepseek_v41/weights.h"

namespace deepinfer::v41 {
namespace {

v4::RopeTable rope_table(const Config& c, const RopeConfig& r) {
  const v4::YarnConfig yarn{r.yarn, r.factor, r.original_max_position_embeddings, r.beta_fast,
                            r.beta_slow};
  return v4::RopeTable(r.theta, c.rope_dim, &yarn, v4::RopeTable::Precision::kTorchFp32);
}

v4::HcDims hc_dims(const Config& c) {
  return {c.hc_mult, c.hidden_size, c.hc_sinkhorn_iters, static_cast<float>(c.rms_norm_eps),
          static_cast<float>(c.hc_eps)};
}

Status check_supported(const Config& c, const ModelOptions& options, const std::string& dir) {
  if (options.numerics != v4::Numerics::kPlain)
    return unimplemented("deepseek_v41: only plain numerics exist (" + dir + ")");
  const std::pair<const char*, const RopeConfig*> ropes[] = {{"main", &c.rope_main},
                                                             {"compress", &c.rope_compress}};
  for (const auto& [name, r] : ropes)
    if (r->attention_factor != 1.0)
      return unimplemented(dir + "/config.json: text_config.rope_parameters." + name +
                           ".attention_factor " + std::to_string(r->attention_factor) +
                           " (YaRN magnitude scaling) is not supported; V4.1 uses 1.0");
  if (c.num_kv_heads != 1)
    return unimplemented(dir + "/config.json: text_config.num_key_value_heads must be 1");
  return ok_status();
}

// The state's shape follows the config: rings per layer, compressed branches at the KV sources,
// the Engram look-back.
bool state_matches(const Config& c, const SequenceState& s) {
  if (!s.layout || static_cast<int>(s.window.size()) != c.num_layers ||
      static_cast<int>(s.sources.size()) != c.num_layers)
    return false;
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerLayout& ll = s.layout->layers()[l];
    if (s.window[l].size() != static_cast<size_t>(c.sliding_window) || ll.ring.width != c.head_dim)
      return false;
    if (s.sources[l].ratio != (c.is_kv_source(l) ? c.compress_ratio(l) : 0)) return false;
    if (s.sources[l].ratio > 0 &&
        (ll.source.entry_dim != c.head_dim || ll.source.key_dim != c.index_head_dim))
      return false;
  }
  const size_t history = c.engram.layer_ids.empty() ? 0 : c.engram.max_ngram_size - 1;
  return s.engram_history.size() == history;
}

// The mean over the hc streams of each row of X [n, hc, H], into row t of out at stride `stride`.
void record_tap(const float* X, int64_t n, int hc, int64_t H, int64_t stride, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    float* row = out + t * stride;
    for (int64_t i = 0; i < H; ++i) {
      float sum = 0.0f;
      for (int j = 0; j < hc; ++j) sum += X[(t * hc + j) * H + i];
      row[i] = sum / static_cast<float>(hc);
    }
  }
}

// Engram look-back rows hold compressed ids as int32 bits (exact, whatever the id).
int64_t load_id(const float* row) {
  int32_t v;
  std::memcpy(&v, row, 4);
  return v;
}
void store_id(int64_t id, float* row) {
  const int32_t v = static_cast<int32_t>(id);
  std::memcpy(row, &v, 4);
}

}  // namespace

StatusOr<std::unique_ptr<CpuModel>> CpuModel::load(
    const std::string& dir, const ModelOptions& options,
    const std::function<void(const v4::LoadProgress&)>& progress) {
  ASSIGN_OR_RETURN(Config config, load_config(dir));
  return load(dir, std::move(config), options, progress);
}

StatusOr<std::unique_ptr<CpuModel>> CpuModel::load(
    const std::string& dir, Config config, const ModelOptions& options,
    const std::function<void(const v4::LoadProgress&)>& progress) {
  RETURN_IF_ERROR(check_supported(config, options, dir));
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt, Checkpoint::open(dir));
  RETURN_IF_ERROR(v4::check_expert_placement(options.placement.get(), options.expert_group,
                                             config.num_layers, config.n_routed_experts));
  std::function<bool(const std::string&)> keep;
  if (Collective* g = options.expert_group)
    keep = [rank = g->rank(), size = g->size(), placement = options.placement.get()](
               const std::string& name) { return v4::keeps_tensor(name, rank, size, placement); };
  ASSIGN_OR_RETURN(v4::Weights weights, load_weights(*ckpt, config, progress, keep));
  std::optional<EngramTables> engram;
  if (!config.engram.layer_ids.empty()) {
    ASSIGN_OR_RETURN(EngramTables tables, load_engram_tables(config, dir, *ckpt));
    engram = std::move(tables);
  } else {
    ckpt.reset();  // nothing is read in place: unmap the shards
  }
  return std::make_unique<CpuModel>(std::move(config), std::move(weights), std::move(ckpt),
                                    std::move(engram), options);
}

CpuModel::CpuModel(Config config, v4::Weights weights, std::unique_ptr<Checkpoint> ckpt,
                   std::optional<EngramTables> engram, const ModelOptions& options)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      ckpt_(std::move(ckpt)),
      engram_(std::move(engram)),
      placement_(options.placement),
      routed_counts_(config_.num_layers, config_.n_routed_experts),
      ctx_{config_,
           weights_,
           rope_table(config_, config_.rope_main),
           rope_table(config_, config_.rope_compress),
           options.expert_group,
           placement_.get(),
           &routed_counts_,
           options.two_batch_overlap} {}

Status CpuModel::block_forward(int l, float* X, float* pre, int64_t n, int64_t pos0,
                               SequenceState& st, ForwardShared& shared, LayerRows rows) const {
  const std::string p = layer_prefix(l);
  const int64_t a = rows.attn_from;
  mhc_sublayer(ctx_, p, "attn", X, pre, a, n, [&](const float* y, int64_t m, float* f) {
    attention_forward(ctx_, l, y, m, pos0 + a, st, shared, f, a);
  });
  if (ctx_.expert_group == nullptr) {
    mhc_sublayer(ctx_, p, "ffn", X, pre, rows.ffn_from, n,
                 [&](const float* y, int64_t m, float* f) { moe_forward(ctx_, l, y, m, f); });
    return ok_status();
  }
  // Expert parallelism: every rank takes part in each layer's MoE, rows or not.
  if (rows.ffn_from >= n) return moe_forward_ep(ctx_, l, nullptr, 0, nullptr);
  Status st_ep;
  mhc_sublayer(ctx_, p, "ffn", X, pre, rows.ffn_from, n, [&](const float* y, int64_t m, float* f) {
    st_ep = moe_forward_ep(ctx_, l, y, m, f);
  });
  return st_ep;
}

Status CpuModel::expert_parallel_idle() const {
  if (ctx_.expert_group == nullptr) return ok_status();
  for (int l = 0; l < config_.num_layers; ++l)
    RETURN_IF_ERROR(moe_forward_ep(ctx_, l, nullptr, 0, nullptr));
  return ok_status();
}

Status CpuModel::forward(SequenceState& state, const int32_t* ids, int64_t n, bool all_logits,
                         std::vector<float>* logits, int64_t keep_from_pos,
                         std::vector<float>* taps) const {
  const Config& c = config_;
  if (n <= 0) return invalid_argument("forward: no tokens");
  if (!state_matches(c, state))
    return invalid_argument("forward: sequence state belongs to a different model");
  for (int64_t t = 0; t < n; ++t) {
    const bool in_vocab = ids[t] >= 0 && ids[t] < c.vocab_size;
    if (!in_vocab)
      return invalid_argument("token id " + std::to_string(ids[t]) + " at position " +
                              std::to_string(state.num_tokens + t) +
                              " is outside the vocabulary (" + std::to_string(c.vocab_size) + ")");
  }
  const int hc = c.hc_mult;
  const int64_t H = c.hidden_size, pos0 = state.num_tokens;
  std::vector<float> X(n * hc * H), pre(n * hc, 0.0f);
  const float* embed = weights_.f("embed.weight");
  for (int64_t t = 0; t < n; ++t) {
    for (int j = 0; j < hc; ++j)
      std::copy(embed + int64_t(ids[t]) * H, embed + int64_t(ids[t] + 1) * H, &X[(t * hc + j) * H]);
    pre[t * hc] = 1.0f;  // layer 0's attention collapses stream 0 alone
  }
  std::optional<EngramPrefetch> prefetch;
  if (engram_) {
    const EngramHasher& hasher = engram_->hasher;
    // The ids of positions [first, pos0 + n): the kept look-back, then this call's tokens.
    const std::vector<float*>& kept = state.engram_history;
    const int64_t back = static_cast<int64_t>(kept.size());
    const int64_t first = std::max<int64_t>(0, pos0 - back);
    std::vector<int64_t> history(pos0 + n - first);
    for (int64_t p = first; p < pos0; ++p) history[p - first] = load_id(kept[p % back]);
    for (int64_t t = 0; t < n; ++t) history[pos0 + t - first] = engram_->token_map[ids[t]];
    std::vector<int64_t> engram_rows(n * hasher.n_layers() * hasher.n_cols());
    hasher.hash(history, first, pos0, pos0 + n, engram_rows);
    for (int64_t p = std::max(first, pos0 + n - back); p < pos0 + n; ++p)
      store_id(history[p - first], kept[p % back]);
    prefetch.emplace(*engram_, std::move(engram_rows), n);  // gathers while layer 0 runs
  }
  ForwardShared shared;
  // Rows [full_from, n) are computed in full; the rest skip the last layer's MoE and the head.
  const int64_t full_from = std::clamp<int64_t>(keep_from_pos - pos0, 0, n);
  const std::vector<int>& tap_layers = c.dspark.target_layer_ids;
  const int64_t tap_width = static_cast<int64_t>(tap_layers.size()) * H;
  if (taps) taps->assign(n * tap_width, 0.0f);
  // The taps read every row of their layers: with them only the last layer's MoE is trimmed.
  std::vector<LayerRows> layer_rows(static_cast<size_t>(c.num_layers));
  if (taps && c.num_layers > 0)
    layer_rows.back().ffn_from = full_from;
  else
    layer_rows = yoco_layer_rows(c, n, full_from);
  for (int l = 0; l < c.num_layers; ++l) {
    if (c.is_engram_layer(l))
      engram_forward(ctx_, l, engram_->hasher, prefetch->rows_of(c.layers[l].engram_slot), n,
                     X.data());
    for (size_t k = 0; taps && k < tap_layers.size(); ++k)
      if (tap_layers[k] == l) record_tap(X.data(), n, hc, H, tap_width, taps->data() + k * H);
    RETURN_IF_ERROR(block_forward(l, X.data(), pre.data(), n, pos0, state, shared, layer_rows[l]));
  }

  const int64_t rows = all_logits ? n : 1;
  logits->resize(rows * c.vocab_size);
  const v4::HcDims d = hc_dims(c);
  std::vector<float> y(H);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = all_logits ? r : n - 1;
    float* row = logits->data() + r * c.vocab_size;
    if (t < full_from) {
      std::fill(row, row + c.vocab_size, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    v4::hc_collapse(d, &pre[t * hc], &X[t * hc * H], y.data());
    cpu::rms_norm(y.data(), weights_.f("norm.weight"), H, ctx_.eps(), y.data());
    cpu::linear(weights_.f("head.weight"), c.vocab_size, H, y.data(), 1, row);
  }
  state.num_tokens += n;
  return ok_status();
}

}  // namespace deepinfer::v41

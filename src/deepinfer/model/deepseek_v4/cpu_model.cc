#include "deepinfer/model/deepseek_v4/cpu_model.h"

#include <algorithm>
#include <limits>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/model/deepseek_v4/expert_parallel_moe.h"
#include "deepinfer/model/deepseek_v4/mhc.h"

namespace deepinfer::v4 {

StatusOr<Numerics> parse_numerics(const std::string& s) {
  if (s == "plain") return Numerics::kPlain;
  if (s == "official") return Numerics::kOfficial;
  return invalid_argument("numerics must be 'plain' or 'official', got '" + s + "'");
}

StatusOr<std::unique_ptr<CpuModel>> CpuModel::load(
    const std::string& dir, const ModelOptions& options,
    const std::function<void(const LoadProgress&)>& progress) {
  ASSIGN_OR_RETURN(Config config, load_config(dir));
  return load(dir, std::move(config), options, progress);
}

StatusOr<std::unique_ptr<CpuModel>> CpuModel::load(
    const std::string& dir, Config config, const ModelOptions& options,
    const std::function<void(const LoadProgress&)>& progress) {
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt, Checkpoint::open(dir));
  drop_absent_mtp(*ckpt, &config);
  RETURN_IF_ERROR(check_expert_placement(options.placement.get(), options.expert_group,
                                         config.num_layers, config.n_routed_experts));
  std::function<bool(const std::string&)> keep;
  if (Collective* g = options.expert_group)
    keep = [rank = g->rank(), size = g->size(), placement = options.placement.get()](
               const std::string& name) { return keeps_tensor(name, rank, size, placement); };
  ASSIGN_OR_RETURN(Weights weights, load_weights(*ckpt, config, progress, keep));
  return std::make_unique<CpuModel>(std::move(config), std::move(weights), options);
}

CpuModel::CpuModel(Config config, Weights weights, const ModelOptions& options)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      placement_(options.placement),
      routed_counts_(config_.num_layers, config_.n_routed_experts),
      ctx_{config_,
           weights_,
           options.numerics,
           options.clamp_shared_expert.value_or(options.numerics == Numerics::kPlain),
           RopeTable(config_.rope_theta, config_.rope_dim, nullptr),
           RopeTable(config_.compress_rope_theta, config_.rope_dim, &config_.yarn),
           options.expert_group,
           placement_.get(),
           &routed_counts_,
           options.two_batch_overlap},
      layout_(std::make_shared<const StateLayout>(config_, kDefaultPageTokens)) {}

Status CpuModel::block_forward(const std::string& p, int ratio, bool hash, float* X,
                               const int32_t* ids, int64_t n, int64_t pos0, LayerState& st,
                               int64_t ffn_from) const {
  // Under expert parallelism every rank takes part in each main layer's MoE, rows or not.
  const bool ep = ctx_.expert_group != nullptr && p.rfind("layers.", 0) == 0;
  const Config& c = config_;
  const int hc = c.hc_mult;
  const int64_t H = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> y(n * H), post(n * hc), comb(n * hc * hc), f(n * H);
  for (const char* site : {"attn", "ffn"}) {
    const std::string s(site);
    const int64_t t0 = s == "attn" ? 0 : ffn_from;  // every row is independent here
    if (t0 >= n) {
      if (ep && s == "ffn")
        RETURN_IF_ERROR(moe_forward_ep(ctx_, p, hash, y.data(), ids, 0, f.data()));
      continue;
    }
    HcWeights hw{weights_.f(p + "hc_" + s + "_fn"), weights_.f(p + "hc_" + s + "_base"),
                 weights_.f(p + "hc_" + s + "_scale")};
    const float* norm = weights_.f(p + s + "_norm.weight");
    for (int64_t t = t0; t < n; ++t) {
      hc_pre(c, hw, X + t * hc * H, &y[t * H], &post[t * hc], &comb[t * hc * hc]);
      cpu::rms_norm(&y[t * H], norm, H, eps, &y[t * H]);
    }
    if (s == "attn") {
      attention_forward(ctx_, p, ratio, y.data(), n, pos0, st, f.data());
    } else if (ep) {
      RETURN_IF_ERROR(moe_forward_ep(ctx_, p, hash, &y[t0 * H], ids + t0, n - t0, &f[t0 * H]));
    } else {
      moe_forward(ctx_, p, hash, &y[t0 * H], ids + t0, n - t0, &f[t0 * H]);
    }
    for (int64_t t = t0; t < n; ++t)
      hc_post(c, &f[t * H], &post[t * hc], &comb[t * hc * hc], X + t * hc * H);
  }
  return ok_status();
}

void CpuModel::head_forward(const std::string& hp, const std::string& norm, const float* X,
                            float* logits) const {
  const Config& c = config_;
  std::vector<float> y(c.hidden_size);
  hc_head(c,
          {weights_.f(hp + "hc_head_fn"), weights_.f(hp + "hc_head_base"),
           weights_.f(hp + "hc_head_scale")},
          X, y.data());
  cpu::rms_norm(y.data(), weights_.f(norm), c.hidden_size, static_cast<float>(c.rms_norm_eps),
                y.data());
  cpu::linear(weights_.f("head.weight"), c.vocab_size, c.hidden_size, y.data(), 1, logits);
}

Status CpuModel::forward(SequenceState& state, const int32_t* ids, int64_t n, bool all_logits,
                         std::vector<float>* logits, int64_t keep_from_pos) const {
  const Config& c = config_;
  if (n <= 0) return invalid_argument("forward: no tokens");
  for (int64_t t = 0; t < n; ++t)
    if (ids[t] < 0 || ids[t] >= c.vocab_size)
      return invalid_argument("token id " + std::to_string(ids[t]) + " at position " +
                              std::to_string(state.num_tokens + t) +
                              " is outside the vocabulary (" + std::to_string(c.vocab_size) + ")");
  if (static_cast<int>(state.layers.size()) != c.num_layers)
    return invalid_argument("forward: sequence state belongs to a different model");
  const int hc = c.hc_mult;
  const int64_t H = c.hidden_size, pos0 = state.num_tokens;
  std::vector<float> X(n * hc * H);
  const float* embed = weights_.f("embed.weight");
  for (int64_t t = 0; t < n; ++t)
    for (int j = 0; j < hc; ++j)
      std::copy(embed + int64_t(ids[t]) * H, embed + int64_t(ids[t] + 1) * H, &X[(t * hc + j) * H]);
  // Rows [full_from, n) are computed in full; the rest skip the last layer's MoE and the head.
  const int64_t full_from = std::clamp<int64_t>(keep_from_pos - pos0, 0, n);
  for (int l = 0; l < c.num_layers; ++l)
    RETURN_IF_ERROR(block_forward("layers." + std::to_string(l) + ".", c.compress_ratio(l),
                                  c.is_hash_layer(l), X.data(), ids, n, pos0, state.layers[l],
                                  l + 1 == c.num_layers ? full_from : 0));
  const int64_t rows = all_logits ? n : 1;
  logits->resize(rows * c.vocab_size);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = all_logits ? r : n - 1;
    float* row = logits->data() + r * c.vocab_size;
    if (t < full_from)
      std::fill(row, row + c.vocab_size, std::numeric_limits<float>::quiet_NaN());
    else
      head_forward("", "norm.weight", &X[t * hc * H], row);
  }
  state.num_tokens += n;
  if (full_from < n) std::copy(&X[(n - 1) * hc * H], &X[n * hc * H], state.last_hidden.begin());
  state.last_token = ids[n - 1];
  return ok_status();
}

Status CpuModel::expert_parallel_idle() const {
  if (ctx_.expert_group == nullptr) return ok_status();
  for (int l = 0; l < config_.num_layers; ++l)
    RETURN_IF_ERROR(moe_forward_ep(ctx_, "layers." + std::to_string(l) + ".",
                                   config_.is_hash_layer(l), nullptr, nullptr, 0, nullptr));
  return ok_status();
}

Status CpuModel::mtp_step(SequenceState& state, const float* hidden, int32_t token, int64_t pos,
                          std::vector<float>* Xout, std::vector<float>* logits) const {
  const Config& c = config_;
  if (c.num_mtp_layers < 1) return failed_precondition("model has no MTP layer");
  if (state.num_tokens == 0) return failed_precondition("mtp_forward: empty sequence");
  if (token < 0 || token >= c.vocab_size)
    return invalid_argument("mtp_forward: token id " + std::to_string(token) + " out of range");
  const int hc = c.hc_mult;
  const int64_t H = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const std::string p = "mtp.0.";
  const int32_t id = token;
  std::vector<float> e(weights_.f("embed.weight") + int64_t(id) * H,
                       weights_.f("embed.weight") + int64_t(id + 1) * H);
  cpu::rms_norm(e.data(), weights_.f(p + "enorm.weight"), H, eps, e.data());
  std::vector<float> E(H), hn(H);
  std::vector<float>& X = *Xout;
  X.assign(static_cast<size_t>(hc * H), 0.0f);
  quantized_linear(ctx_, weights_.f(p + "e_proj.weight"), H, H, e.data(), 1, E.data());
  for (int j = 0; j < hc; ++j) {
    cpu::rms_norm(&hidden[j * H], weights_.f(p + "hnorm.weight"), H, eps, hn.data());
    quantized_linear(ctx_, weights_.f(p + "h_proj.weight"), H, H, hn.data(), 1, &X[j * H]);
    for (int64_t d = 0; d < H; ++d) X[j * H + d] += E[d];
  }
  RETURN_IF_ERROR(block_forward(p, 0, false, X.data(), &id, 1, pos, state.mtp));
  logits->resize(c.vocab_size);
  head_forward(p, p + "norm.weight", X.data(), logits->data());
  return ok_status();
}

Status CpuModel::mtp_forward(SequenceState& state, int32_t token,
                             std::vector<float>* logits) const {
  std::vector<float> X;
  return mtp_step(state, state.last_hidden.data(), token, state.num_tokens, &X, logits);
}

Status CpuModel::mtp_draft(SequenceState& state, int32_t token, int64_t k,
                           std::vector<int32_t>* drafts) const {
  std::vector<float> hidden = state.last_hidden, X, logits;
  int32_t t = token;
  for (int64_t j = 0; j < k; ++j) {
    RETURN_IF_ERROR(mtp_step(state, hidden.data(), t, state.num_tokens + j, &X, &logits));
    int64_t best = 0;  // ties to the lower id, as greedy sampling
    for (int64_t v = 1; v < static_cast<int64_t>(logits.size()); ++v)
      if (logits[v] > logits[best]) best = v;
    t = static_cast<int32_t>(best);
    drafts->push_back(t);
    hidden.swap(X);
  }
  return ok_status();
}

}  // namespace deepinfer::v4

#include "deepinfer/model/deepseek_v41/dspark.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/model/deepseek_v4/mhc.h"
#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "deepinfer/model/deepseek_v41/weights.h"

namespace deepinfer::v41 {
namespace {

std::string stage_prefix(int s) { return "mtp." + std::to_string(s) + "."; }

Status check_config(const Config& c) {
  auto bad = [](const std::string& field, const std::string& why) {
    return invalid_argument("deepseek_v41 DSpark drafter: field '" + field + "' " + why);
  };
  const DsparkConfig& d = c.dspark;
  if (c.num_nextn_layers <= 0) return bad("num_nextn_predict_layers", "is 0: no draft layers");
  if (d.block_size <= 0) return bad("dspark_block_size", "must be positive");
  if (d.noise_token_id < 0 || d.noise_token_id >= c.vocab_size)
    return bad("dspark_noise_token_id", std::to_string(d.noise_token_id) +
                                            " is outside the vocabulary (" +
                                            std::to_string(c.vocab_size) + ")");
  if (d.target_layer_ids.empty()) return bad("dspark_target_layer_ids", "is empty");
  if (d.markov_rank <= 0) return bad("dspark_markov_rank", "must be positive");
  if (d.n_routed_experts <= 0) return bad("dspark_n_routed_experts", "must be positive");
  if (d.experts_per_token <= 0 || d.experts_per_token > d.n_routed_experts)
    return bad("dspark_num_experts_per_tok", "must be in 1..dspark_n_routed_experts");
  return ok_status();
}

// Lowest id among the largest: ties go to the lower id, as everywhere in this forward.
int32_t argmax(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return static_cast<int32_t>(best);
}

}  // namespace

void dspark_draft_tokens(const DsparkHeadWeights& w, const float* x, int rows, int32_t anchor,
                         DsparkProposal* out) {
  const int64_t H = w.hidden, V = w.vocab, R = w.rank;
  out->tokens.assign(rows, 0);
  out->confidence.assign(rows, 0.0f);
  out->logits.assign(int64_t(rows) * V, 0.0f);
  std::vector<float> y(H), bias(V), features(H + R);
  int32_t prev = anchor;
  for (int i = 0; i < rows; ++i) {
    const float* xi = x + int64_t(i) * H;
    float* logits = out->logits.data() + int64_t(i) * V;
    cpu::rms_norm(xi, w.norm, H, w.eps, y.data());
    cpu::linear(w.head, V, H, y.data(), 1, logits);
    const float* e = w.markov_embed + int64_t(prev) * R;
    cpu::linear(w.markov_head, V, R, e, 1, bias.data());
    for (int64_t v = 0; v < V; ++v) logits[v] += bias[v];
    // The confidence head reads the un-normed rows (DeepSeek's forward_head, per both ports).
    std::copy(xi, xi + H, features.begin());
    std::copy(e, e + R, features.begin() + H);
    float z = 0.0f;
    cpu::linear(w.confidence_proj, 1, H + R, features.data(), 1, &z);
    out->confidence[i] = cpu::sigmoid(z);
    prev = argmax(logits, V);
    out->tokens[i] = prev;
  }
}

StatusOr<std::unique_ptr<DsparkDrafter>> DsparkDrafter::create(const CpuModel& target) {
  RETURN_IF_ERROR(check_config(target.config()));
  if (!target.has_draft_weights())
    return failed_precondition(no_draft_tensors_reason(target.config()));
  return std::make_unique<DsparkDrafter>(target.context());
}

int64_t DsparkDrafter::tap_width() const {
  return static_cast<int64_t>(m_.c.dspark.target_layer_ids.size()) * m_.c.hidden_size;
}

DsparkState DsparkDrafter::new_state() const {
  DsparkState s;
  s.rings.assign(m_.c.num_nextn_layers,
                 std::vector<float>(int64_t(m_.c.sliding_window) * m_.c.head_dim, 0.0f));
  return s;
}

Status DsparkDrafter::absorb(DsparkState& state, const float* taps, int64_t n) const {
  const Config& c = m_.c;
  if (n <= 0) return invalid_argument("DSpark absorb: no rows");
  if (static_cast<int>(state.rings.size()) != c.num_nextn_layers)
    return invalid_argument("DSpark absorb: state belongs to a different drafter");
  const int64_t H = c.hidden_size, hd = c.head_dim, W = c.sliding_window;
  const int64_t pos0 = state.num_tokens;
  std::vector<float> main_x(n * H), kv(n * hd);
  cpu::linear(m_.f("mtp.0.main_proj.weight"), H, tap_width(), taps, n, main_x.data());
  for (int64_t t = 0; t < n; ++t)
    cpu::rms_norm(&main_x[t * H], m_.f("mtp.0.main_norm.weight"), H, m_.eps(), &main_x[t * H]);
  for (int s = 0; s < c.num_nextn_layers; ++s) {
    attention_window_kv(m_, stage_prefix(s), m_.main_rope, main_x.data(), n, pos0, kv.data());
    float* ring = state.rings[s].data();
    for (int64_t t = std::max<int64_t>(0, n - W); t < n; ++t)
      std::copy(&kv[t * hd], &kv[(t + 1) * hd], ring + ((pos0 + t) % W) * hd);
  }
  state.num_tokens += n;
  return ok_status();
}

void DsparkDrafter::stage_attention(int s, const DsparkState& state, const float* y,
                                    float* out) const {
  const Config& c = m_.c;
  const std::string p = stage_prefix(s);
  const int bs = c.dspark.block_size, nh = c.num_heads, hd = c.head_dim, rd = c.rope_dim;
  const int64_t W = c.sliding_window, pos0 = state.num_tokens;
  const v4::RopeTable& rope = m_.main_rope;  // draft layers are sliding only (ratio 0)
  std::vector<float> qr(bs * c.q_lora_rank), q(int64_t(bs) * nh * hd), kv(int64_t(bs) * hd);
  attention_query(m_, p, rope, y, bs, pos0, qr.data(), q.data());
  attention_window_kv(m_, p, rope, y, bs, pos0, kv.data());
  // Every block row sees the same keys: the absorbed window up to pos0 - 1, then the whole block
  // (not causal: the block is drafted at once).
  std::vector<const float*> keys;
  for (int64_t pos = std::max<int64_t>(0, pos0 - W); pos < pos0; ++pos)
    keys.push_back(state.rings[s].data() + (pos % W) * hd);
  for (int t = 0; t < bs; ++t) keys.push_back(&kv[int64_t(t) * hd]);
  const float* sinks = m_.f(p + "attn.attn_sink");
  const float scale = static_cast<float>(std::pow(double(hd), -0.5));
  std::vector<float> o(int64_t(bs) * nh * hd);
  ThreadPool::default_pool().parallel_for(int64_t(bs) * nh, 1, [&](int64_t b, int64_t e) {
    for (int64_t job = b; job < e; ++job) {
      float* oh = &o[job * hd];
      cpu::sink_attention(&q[job * hd], keys.data(), static_cast<int64_t>(keys.size()),
                          sinks[job % nh], hd, scale, oh);
      rope.rotate(oh + hd - rd, pos0 + job / nh, /*inverse=*/true);
    }
  });
  attention_output(m_, p, o.data(), bs, out);
}

Status DsparkDrafter::propose(const DsparkState& state, int32_t anchor, DsparkProposal* out) const {
  const Config& c = m_.c;
  if (anchor < 0 || anchor >= c.vocab_size)
    return invalid_argument("DSpark propose: anchor token " + std::to_string(anchor) +
                            " is outside the vocabulary (" + std::to_string(c.vocab_size) + ")");
  if (static_cast<int>(state.rings.size()) != c.num_nextn_layers)
    return invalid_argument("DSpark propose: state belongs to a different drafter");
  const int bs = c.dspark.block_size, hc = c.hc_mult;
  const int64_t H = c.hidden_size;
  // The block [anchor, noise, ...] enters as the backbone's tokens do: each row's embedding in
  // every stream, and stage 0's attention collapses stream 0 alone.
  std::vector<float> X(int64_t(bs) * hc * H), pre(int64_t(bs) * hc, 0.0f);
  const float* embed = m_.f("embed.weight");
  for (int t = 0; t < bs; ++t) {
    const int64_t id = t == 0 ? anchor : c.dspark.noise_token_id;
    for (int j = 0; j < hc; ++j)
      std::copy(embed + id * H, embed + (id + 1) * H, &X[(int64_t(t) * hc + j) * H]);
    pre[int64_t(t) * hc] = 1.0f;
  }
  for (int s = 0; s < c.num_nextn_layers; ++s) {
    const std::string p = stage_prefix(s);
    mhc_sublayer(m_, p, "attn", X.data(), pre.data(), 0, bs,
                 [&](const float* y, int64_t, float* f) { stage_attention(s, state, y, f); });
    mhc_sublayer(m_, p, "ffn", X.data(), pre.data(), 0, bs,
                 [&](const float* y, int64_t rows, float* f) {
                   moe_forward(m_, p + "ffn.", c.dspark.n_routed_experts,
                               c.dspark.experts_per_token, y, rows, f);
                 });
  }
  // The last stage's FFN `pre` collapses the streams (deferred mHC, no hc_head).
  const v4::HcDims d{hc, H, c.hc_sinkhorn_iters, m_.eps(), static_cast<float>(c.hc_eps)};
  std::vector<float> x(int64_t(bs) * H);
  for (int t = 0; t < bs; ++t)
    v4::hc_collapse(d, &pre[int64_t(t) * hc], &X[int64_t(t) * hc * H], &x[int64_t(t) * H]);
  const std::string last = stage_prefix(c.num_nextn_layers - 1);
  DsparkHeadWeights w;
  w.norm = m_.f(last + "norm.weight");
  w.head = m_.f("head.weight");
  w.markov_embed = m_.f(last + "markov_head.embed.weight");
  w.markov_head = m_.f(last + "markov_head.head.weight");
  w.confidence_proj = m_.f(last + "confidence_head.proj.weight");
  w.hidden = H;
  w.vocab = c.vocab_size;
  w.rank = c.dspark.markov_rank;
  w.eps = m_.eps();
  dspark_draft_tokens(w, x.data(), bs, anchor, out);
  return ok_status();
}

}  // namespace deepinfer::v41

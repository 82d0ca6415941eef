// V4.1 MoE (spec §11.2.6, golden_v41 README surprises 4-5): every layer routes by the top-k of
// sqrtsoftplus(logits / gate_temp) + gate.bias (bias_vl is for image tokens, which the text model
// never sees); weights are the unbiased scores, normalized, times routed_scaling_factor. The
// routing weight scales the activation before w2, and the shared expert is clamped too.
#include <algorithm>
#include <cmath>
#include <tuple>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/model/deepseek_v4/model_context.h"  // v4::route_token
#include "deepinfer/model/deepseek_v41/model_context.h"

namespace deepinfer::v41 {

void expert_into(const ModelContext& m, const std::string& p, int64_t inter, const float* h,
                 float weight, float* acc) {
  const int64_t H = m.c.hidden_size;
  const float limit = static_cast<float>(m.c.swiglu_limit);
  std::vector<float> g(inter), u(inter), y(H);
  cpu::linear(m.f(p + "w1.weight"), inter, H, h, 1, g.data());
  cpu::linear(m.f(p + "w3.weight"), inter, H, h, 1, u.data());
  cpu::swiglu(g.data(), u.data(), inter, limit > 0, limit);
  if (weight != 1.0f)
    for (int64_t k = 0; k < inter; ++k) g[k] *= weight;
  cpu::linear(m.f(p + "w2.weight"), H, inter, g.data(), 1, y.data());
  for (int64_t d = 0; d < H; ++d) acc[d] += y[d];
}

void route_in_sum_order(const ModelContext& m, const std::string& p, int E, int K, const float* z,
                        int* idx, float* wts) {
  const Config& c = m.c;
  const float route_scale = static_cast<float>(c.routed_scaling_factor);
  v4::route_token(z, m.f(p + "gate.bias"), nullptr, E, K, route_scale, idx, wts);
  if (!(c.norm_topk_prob && K > 1))
    for (int k = 0; k < K; ++k) wts[k] = std::sqrt(cpu::softplus(z[idx[k]])) * route_scale;
  // transformers adds the experts in id order, then the shared one.
  std::vector<std::pair<int, float>> picks(K);
  for (int k = 0; k < K; ++k) picks[k] = {idx[k], wts[k]};
  std::sort(picks.begin(), picks.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (int k = 0; k < K; ++k) std::tie(idx[k], wts[k]) = picks[k];
}

void moe_forward(const ModelContext& m, int layer, const float* h, int64_t n, float* out) {
  moe_forward(m, layer_prefix(layer) + "ffn.", m.c.n_routed_experts, m.c.experts_per_token, h, n,
              out);
}

void moe_forward(const ModelContext& m, const std::string& p, int E, int K, const float* h,
                 int64_t n, float* out) {
  const Config& c = m.c;
  const int64_t H = c.hidden_size;
  const float temp = static_cast<float>(c.gate_temp);
  std::vector<float> logits(n * E);
  cpu::linear_fp32(m.f(p + "gate.weight"), E, H, h, n, logits.data());
  for (float& z : logits) z /= temp;
  const int layer = m.routed_counts ? main_layer_of(p) : -1;
  ThreadPool::default_pool().parallel_for(n, 1, [&](int64_t b, int64_t e) {
    std::vector<int> idx(K);
    std::vector<float> wts(K);
    for (int64_t t = b; t < e; ++t) {
      route_in_sum_order(m, p, E, K, &logits[t * E], idx.data(), wts.data());
      if (m.routed_counts) m.routed_counts->add(layer, idx.data(), K);
      float* acc = out + t * H;
      std::fill(acc, acc + H, 0.0f);
      for (int k = 0; k < K; ++k)
        expert_into(m, p + "experts." + std::to_string(idx[k]) + ".", c.moe_intermediate_size,
                    h + t * H, wts[k], acc);
      if (c.n_shared_experts > 0)
        expert_into(m, p + "shared_experts.", int64_t(c.moe_intermediate_size) * c.n_shared_experts,
                    h + t * H, 1.0f, acc);
    }
  });
}

}  // namespace deepinfer::v41

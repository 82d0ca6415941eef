// MoE sub-layer (spec §6.8): sqrtsoftplus affinities, hash (tid2eid) or biased top-k selection,
// weights from the unbiased affinities, SwiGLU with clamps, plus the shared expert.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/base/thread_pool.h"
#include "deepinfer/model/deepseek_v4/model_context.h"
#include "deepinfer/tensor/fake_quant.h"

namespace deepinfer::v4 {
namespace {}  // namespace

// One SwiGLU expert on one token, accumulated into acc with `weight`. In official numerics the
// routing weight scales the activation before w2 (and before its FP8 rounding), as the reference
// does; plain numerics scale w2's output, as transformers does.
void expert_into(const ModelContext& m, const std::string& p, int64_t inter, const float* h,
                 float weight, bool clamp, float* acc) {
  const int64_t H = m.c.hidden_size;
  const float lim = static_cast<float>(m.c.swiglu_limit);
  std::vector<float> g(inter), u(inter), y(H);
  quantized_linear(m, m.f(p + "w1.weight"), inter, H, h, 1, g.data());
  quantized_linear(m, m.f(p + "w3.weight"), inter, H, h, 1, u.data());
  const bool before = m.official();
  cpu::swiglu(g.data(), u.data(), inter, clamp, lim);
  if (before)
    for (int64_t k = 0; k < inter; ++k) g[k] *= weight;
  quantized_linear(m, m.f(p + "w2.weight"), H, inter, g.data(), 1, y.data());
  for (int64_t d = 0; d < H; ++d) acc[d] += before ? y[d] : y[d] * weight;
}

void route_token(const float* logits, const float* bias, const int32_t* hash_row, int E, int K,
                 float route_scale, int* idx, float* weights) {
  std::vector<float> a(E), sel(E);
  for (int x = 0; x < E; ++x) a[x] = std::sqrt(cpu::softplus(logits[x]));
  if (hash_row) {
    std::copy(hash_row, hash_row + K, idx);
  } else {
    std::vector<int> order(E);
    for (int x = 0; x < E; ++x) sel[x] = a[x] + bias[x];
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int x, int y) { return sel[x] != sel[y] ? sel[x] > sel[y] : x < y; });
    std::copy(order.begin(), order.begin() + K, idx);
  }
  float sum = 0;
  for (int k = 0; k < K; ++k) sum += a[idx[k]];
  const float scale = route_scale / (sum + 1e-20f);
  for (int k = 0; k < K; ++k) weights[k] = a[idx[k]] * scale;
}

void moe_forward(const ModelContext& m, const std::string& p, bool hash, const float* h,
                 const int32_t* ids, int64_t n, float* out) {
  const Config& c = m.c;
  const int64_t H = c.hidden_size;
  const int E = c.n_routed_experts, K = c.experts_per_token;
  std::vector<float> logits(n * E);
  cpu::linear_fp32(m.f(p + "ffn.gate.weight"), E, H, h, n, logits.data());
  const int layer = m.routed_counts ? main_layer_of(p) : -1;
  ThreadPool::default_pool().parallel_for(n, 1, [&](int64_t b, int64_t e) {
    std::vector<int> idx(K);
    std::vector<float> wts(K);
    for (int64_t t = b; t < e; ++t) {
      const int32_t* hash_row =
          hash ? m.w.i(p + "ffn.gate.tid2eid") + int64_t(ids[t]) * K : nullptr;
      route_token(&logits[t * E], hash ? nullptr : m.f(p + "ffn.gate.bias"), hash_row, E, K,
                  static_cast<float>(c.routed_scaling_factor), idx.data(), wts.data());
      if (m.routed_counts) m.routed_counts->add(layer, idx.data(), K);
      float* acc = out + t * H;
      std::fill(acc, acc + H, 0.0f);
      for (int k = 0; k < K; ++k)
        expert_into(m, p + "ffn.experts." + std::to_string(idx[k]) + ".", c.moe_intermediate_size,
                    h + t * H, wts[k], true, acc);
      if (c.n_shared_experts > 0)
        expert_into(m, p + "ffn.shared_experts.",
                    int64_t(c.moe_intermediate_size) * c.n_shared_experts, h + t * H, 1.0f,
                    m.clamp_shared_expert, acc);
    }
  });
}

void quantized_linear(const ModelContext& m, const float* w, int64_t out, int64_t in,
                      const float* x, int64_t n, float* y) {
  if (!m.official()) {
    cpu::linear(w, out, in, x, n, y);
    return;
  }
  std::vector<float> xq(x, x + n * in);
  for (int64_t t = 0; t < n; ++t) fake_quant_fp8_blocks(&xq[t * in], in, 128);
  cpu::linear(w, out, in, xq.data(), n, y);
}

}  // namespace deepinfer::v4

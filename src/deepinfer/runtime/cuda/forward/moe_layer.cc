// MoE sub-layer on the GPU (spec §6.8): fp32 router GEMM, device-side routing (hash or biased
// top-k), then MoeRunner's routed + shared experts (grouped on the device in batched decode).
#include "deepinfer/backend/cuda/moe/routing.h"
#include "deepinfer/runtime/cuda/forward/forward_context.h"

namespace deepinfer::cuda {

void moe_layer(const ForwardContext& m, const MoeWeights& w, bool hash, const float* h,
               const int32_t* token_ids, int64_t n, float* out) {
  const v4::Config& c = m.c;
  const int64_t H = c.hidden_size;
  const int E = c.n_routed_experts, K = c.experts_per_token;
  float* logits = grow(m.s.router, n * E);
  m.gemm.f32(w.gate, h, logits, n, E, H, m.stream);
  int32_t* ids = grow(m.s.route_ids, n * K);
  float* wts = grow(m.s.route_w, n * K);
  RoutingArgs r;
  r.logits = logits;
  r.bias = hash ? nullptr : w.bias;
  r.tid2eid = hash ? w.tid2eid : nullptr;
  r.token_ids = hash ? token_ids : nullptr;
  r.tokens = n;
  r.num_experts = E;
  r.top_k = K;
  r.route_scale = static_cast<float>(c.routed_scaling_factor);
  route(r, ids, wts, m.stream);
  if (m.trace && !hash)
    m.record(m.trace->experts[m.layer], ids, (m.batch ? m.batch->real_rows : n) * K);

  m.mark("moe: router");
  MoeArgs& a = m.s.moe;
  a.x = h;
  a.tokens = n;
  a.hidden = H;
  a.inter = c.moe_intermediate_size;
  a.top_k = K;
  a.expert_ids = ids;
  a.weights = wts;
  a.experts.assign(w.experts.begin(), w.experts.end());
  a.device_experts = w.device_experts.get();
  a.expert_format = w.expert_format;
  a.num_experts = E;
  a.shared = c.n_shared_experts > 0 ? &w.shared : nullptr;
  a.shared_inter = int64_t(c.moe_intermediate_size) * c.n_shared_experts;
  a.clamp_shared = m.clamp_shared_expert;
  a.swiglu_limit = static_cast<float>(c.swiglu_limit);
  a.weight_before_w2 = false;  // plain numerics: the routing weight scales w2's output
  a.out = out;
  // Batched decode must stay capturable: device-side grouping, no host copy of the routing.
  // Prefill chunks take it too (one pass over each touched expert's stored weights for all its
  // rows, on tensor cores); run() only past the tokens reserved at load.
  if (m.batch || n <= m.moe.grouped_tokens())
    m.moe.run_grouped(a, m.stream);
  else
    m.moe.run(a, m.stream);
  m.mark("moe: experts");
}

}  // namespace deepinfer::cuda

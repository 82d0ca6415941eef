// MoE sub-layer on the GPU (spec §6.8, §11.2.6): fp32 router GEMM, device-side routing (hash or
// biased top-k), then MoeRunner's routed + shared experts (grouped on the device in batched decode
// and prefill chunks). run_moe is both families'; moe_layer is deepseek_v4's call of it.
#include "deepinfer/backend/cuda/moe/routing.h"
#include "deepinfer/runtime/cuda/forward/forward_context.h"

namespace deepinfer::cuda {

void run_moe(const MoeSpec& spec, const MoeCall& call, const MoeWeights& w, bool hash,
             const float* h, const int32_t* token_ids, int64_t n, float* out) {
  ForwardScratch& s = call.s;
  const int E = spec.experts, K = spec.top_k;
  float* logits = grow(s.router, n * E);
  call.gemm.f32(w.gate, h, logits, n, E, spec.hidden, call.stream);
  int32_t* ids = grow(s.route_ids, n * K);
  float* wts = grow(s.route_w, n * K);
  RoutingArgs r;
  r.logits = logits;
  r.bias = hash ? nullptr : w.bias;
  r.tid2eid = hash ? w.tid2eid : nullptr;
  r.token_ids = hash ? token_ids : nullptr;
  r.tokens = n;
  r.num_experts = E;
  r.top_k = K;
  r.route_scale = spec.route_scale;
  r.temperature = spec.temperature;
  r.normalize = spec.normalize;
  route(r, ids, wts, call.stream);
  if (call.routed) call.routed(ids);

  MoeArgs& a = s.moe;
  a.x = h;
  a.xb = call.hb;
  a.tokens = n;
  a.hidden = spec.hidden;
  a.inter = spec.inter;
  a.top_k = K;
  a.expert_ids = ids;
  a.weights = wts;
  a.experts.assign(w.experts.begin(), w.experts.end());
  a.device_experts = w.device_experts.get();
  a.expert_format = w.expert_format;
  a.num_experts = E;
  a.shared = spec.shared_inter > 0 ? &w.shared : nullptr;
  a.shared_inter = spec.shared_inter;
  a.clamp_shared = spec.clamp_shared;
  a.swiglu_limit = spec.swiglu_limit;
  a.weight_before_w2 = spec.weight_before_w2;
  a.out = out;
  // Batched decode must stay capturable: device-side grouping, no host copy of the routing.
  // Prefill chunks take it too (one pass over each touched expert's stored weights for all its
  // rows, on tensor cores); run() only past the tokens reserved at load.
  // Batch-invariant: always the grouped kernels (run() groups on the host and takes other sums).
  if (call.graph_safe || call.gemm.batch_invariant() || n <= call.moe.grouped_tokens())
    call.moe.run_grouped(a, call.stream);
  else
    call.moe.run(a, call.stream);
}

void moe_layer(const ForwardContext& m, const MoeWeights& w, bool hash, const float* h,
               const __nv_bfloat16* hb, const int32_t* token_ids, int64_t n, float* out) {
  const v4::Config& c = m.c;
  MoeSpec spec;
  spec.hidden = c.hidden_size;
  spec.experts = c.n_routed_experts;
  spec.top_k = c.experts_per_token;
  spec.inter = c.moe_intermediate_size;
  spec.shared_inter = int64_t(c.moe_intermediate_size) * c.n_shared_experts;
  spec.route_scale = static_cast<float>(c.routed_scaling_factor);
  spec.swiglu_limit = static_cast<float>(c.swiglu_limit);
  spec.clamp_shared = m.clamp_shared_expert;
  spec.weight_before_w2 = false;  // plain numerics: the routing weight scales w2's output
  const MoeCall call{m.gemm,
                     m.moe,
                     m.s,
                     m.stream,
                     m.batch != nullptr,
                     [&](const int32_t* ids) {
                       if (m.trace && !hash)
                         m.record(m.trace->experts[m.layer], ids,
                                  (m.batch ? m.batch->real_rows : n) * c.experts_per_token);
                       m.mark("moe: router");
                     },
                     hb};
  run_moe(spec, call, w, hash, h, token_ids, n, out);
  m.mark("moe: experts");
}

}  // namespace deepinfer::cuda

// V4.1's MoE with the routed experts spread over a group (issue 22): as v4's
// expert_parallel_moe.h, with V4.1's routing and its summation in expert id order (the slots
// are filled in that order).
#include "deepinfer/model/deepseek_v4/expert_parallel_moe.h"  // v4::expert_rank, the sums

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/backend/cpu/expert_exchange.h"
#include "deepinfer/model/deepseek_v41/model_context.h"

namespace deepinfer::v41 {

Status moe_forward_ep(const ModelContext& m, int layer, const float* h, int64_t n, float* out) {
  const Config& c = m.c;
  const std::string p = layer_prefix(layer) + "ffn.";
  const int64_t H = c.hidden_size;
  const int E = c.n_routed_experts, K = c.experts_per_token;
  std::vector<float> logits(n * E);
  if (n > 0) cpu::linear_fp32(m.f(p + "gate.weight"), E, H, h, n, logits.data());
  for (float& z : logits) z /= static_cast<float>(c.gate_temp);
  std::vector<cpu::ExpertPair> pairs(n * K);
  std::vector<int> idx(K);
  std::vector<float> wts(K);
  for (int64_t t = 0; t < n; ++t) {
    route_in_sum_order(m, p, E, K, &logits[t * E], idx.data(), wts.data());
    if (m.routed_counts) m.routed_counts->add(layer, idx.data(), K);
    for (int k = 0; k < K; ++k)
      pairs[t * K + k] = {static_cast<int32_t>(t), k, idx[k], wts[k],
                          v4::expert_rank(*m.expert_group, m.placement, layer, idx[k], t)};
  }
  std::vector<float> shared;
  cpu::ExchangeSchedule schedule;
  schedule.two_batch = m.two_batch_overlap;
  if (c.n_shared_experts > 0)
    schedule.local = [&] {
      shared = v4::shared_expert_rows(n, H, h, [&](const float* row, float* acc) {
        expert_into(m, p + "shared_experts.", int64_t(c.moe_intermediate_size) * c.n_shared_experts,
                    row, 1.0f, acc);
      });
    };
  std::vector<float> contrib(n * K * H);
  RETURN_IF_ERROR(cpu::exchange_experts(
      *m.expert_group, h, H, n, K, pairs,
      [&](int32_t e, const float* row, float weight, float* o) {
        expert_into(m, p + "experts." + std::to_string(e) + ".", c.moe_intermediate_size, row,
                    weight, o);
      },
      schedule, contrib.data()));
  v4::sum_in_slot_order(contrib.data(), shared.empty() ? nullptr : shared.data(), n, K, H, out);
  return ok_status();
}

}  // namespace deepinfer::v41

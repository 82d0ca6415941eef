#include "deepinfer/model/deepseek_v4/expert_parallel_moe.h"

#include <cstring>
#include <vector>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/backend/cpu/expert_exchange.h"

namespace deepinfer::v4 {

bool keeps_tensor(const std::string& name, int rank, int size, const ExpertPlacement* placement) {
  constexpr std::string_view kExperts = ".ffn.experts.";
  if (size <= 1 || name.rfind("layers.", 0) != 0) return true;
  const size_t at = name.find(kExperts);
  if (at == std::string::npos) return true;
  const int64_t e = std::strtoll(name.c_str() + at + kExperts.size(), nullptr, 10);
  if (placement != nullptr) return placement->holds(rank, main_layer_of(name), static_cast<int>(e));
  return e % size == rank;
}

int expert_rank(const Collective& group, const ExpertPlacement* placement, int layer, int expert,
                int64_t row) {
  if (placement == nullptr) return expert % group.size();
  return placement->rank_for(layer, expert, group.rank(), row);
}

Status check_expert_placement(const ExpertPlacement* placement, const Collective* group,
                              int num_layers, int num_experts) {
  if (placement == nullptr) return ok_status();
  if (group == nullptr)
    return invalid_argument("an EPLB plan needs an expert-parallel group (--expert-parallel-size)");
  return check_placement_fits(*placement, num_layers, num_experts, group->size());
}

Status moe_forward_ep(const ModelContext& m, const std::string& p, bool hash, const float* h,
                      const int32_t* ids, int64_t n, float* out) {
  const Config& c = m.c;
  const int64_t H = c.hidden_size;
  const int E = c.n_routed_experts, K = c.experts_per_token;
  // Route (the router is replicated); slot k is the k-th pick, the order moe_forward adds in.
  std::vector<float> logits(n * E);
  if (n > 0) cpu::linear_fp32(m.f(p + "ffn.gate.weight"), E, H, h, n, logits.data());
  std::vector<cpu::ExpertPair> pairs(n * K);
  std::vector<int> idx(K);
  std::vector<float> wts(K);
  const int layer = main_layer_of(p);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t* hash_row = hash ? m.w.i(p + "ffn.gate.tid2eid") + int64_t(ids[t]) * K : nullptr;
    route_token(&logits[t * E], hash ? nullptr : m.f(p + "ffn.gate.bias"), hash_row, E, K,
                static_cast<float>(c.routed_scaling_factor), idx.data(), wts.data());
    if (m.routed_counts) m.routed_counts->add(layer, idx.data(), K);
    for (int k = 0; k < K; ++k)
      pairs[t * K + k] = {static_cast<int32_t>(t), k, idx[k], wts[k],
                          expert_rank(*m.expert_group, m.placement, layer, idx[k], t)};
  }
  std::vector<float> contrib(n * K * H);
  RETURN_IF_ERROR(cpu::exchange_experts(
      *m.expert_group, h, H, n, K, pairs,
      [&](int32_t e, const float* row, float weight, float* o) {
        expert_into(m, p + "ffn.experts." + std::to_string(e) + ".", c.moe_intermediate_size, row,
                    weight, true, o);
      },
      contrib.data()));
  for (int64_t t = 0; t < n; ++t) {
    float* acc = out + t * H;
    std::fill(acc, acc + H, 0.0f);
    for (int k = 0; k < K; ++k)
      for (int64_t d = 0; d < H; ++d) acc[d] += contrib[(t * K + k) * H + d];
    if (c.n_shared_experts > 0)
      expert_into(m, p + "ffn.shared_experts.",
                  int64_t(c.moe_intermediate_size) * c.n_shared_experts, h + t * H, 1.0f,
                  m.clamp_shared_expert, acc);
  }
  return ok_status();
}

}  // namespace deepinfer::v4

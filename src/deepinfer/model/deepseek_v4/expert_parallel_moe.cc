#include "deepinfer/model/deepseek_v4/expert_parallel_moe.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/backend/cpu/expert_exchange.h"
#include "deepinfer/base/thread_pool.h"

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

std::vector<float> shared_expert_rows(int64_t n, int64_t hidden, const float* h,
                                      const std::function<void(const float*, float*)>& expert) {
  // -0 + y is y for every y (+0 included), so each row holds exactly what the expert would
  // have added into the sum.
  std::vector<float> out(n * hidden, -0.0f);
  ThreadPool::default_pool().parallel_for(n, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) expert(h + t * hidden, &out[t * hidden]);
  });
  return out;
}

void sum_in_slot_order(const float* contrib, const float* shared, int64_t n, int K, int64_t hidden,
                       float* out) {
  for (int64_t t = 0; t < n; ++t) {
    float* acc = out + t * hidden;
    std::fill(acc, acc + hidden, 0.0f);
    for (int k = 0; k < K; ++k)
      for (int64_t d = 0; d < hidden; ++d) acc[d] += contrib[(t * K + k) * hidden + d];
    if (shared)
      for (int64_t d = 0; d < hidden; ++d) acc[d] += shared[t * hidden + d];
  }
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
  // The shared expert needs no exchange: it runs while the exchange is on the wire.
  std::vector<float> shared;
  cpu::ExchangeSchedule schedule;
  schedule.two_batch = m.two_batch_overlap;
  if (c.n_shared_experts > 0)
    schedule.local = [&] {
      shared = shared_expert_rows(n, H, h, [&](const float* row, float* acc) {
        expert_into(m, p + "ffn.shared_experts.",
                    int64_t(c.moe_intermediate_size) * c.n_shared_experts, row, 1.0f,
                    m.clamp_shared_expert, acc);
      });
    };
  std::vector<float> contrib(n * K * H);
  RETURN_IF_ERROR(cpu::exchange_experts(
      *m.expert_group, h, H, n, K, pairs,
      [&](int32_t e, const float* row, float weight, float* o) {
        expert_into(m, p + "ffn.experts." + std::to_string(e) + ".", c.moe_intermediate_size, row,
                    weight, true, o);
      },
      schedule, contrib.data()));
  sum_in_slot_order(contrib.data(), shared.empty() ? nullptr : shared.data(), n, K, H, out);
  return ok_status();
}

}  // namespace deepinfer::v4

#include "deepinfer/model/deepseek_v4/expert_parallel_moe.h"

#include <cstring>
#include <vector>

#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/base/thread_pool.h"

namespace deepinfer::v4 {
namespace {

// Dispatch record: token, slot (0..K-1), expert, weight, then the token's hidden row.
// Combine record: token, slot, then the expert's weighted output.
constexpr size_t kHead = 4 * sizeof(int32_t);

void put_i32(std::string* s, int32_t v) { s->append(reinterpret_cast<const char*>(&v), 4); }
void put_f32(std::string* s, float v) { s->append(reinterpret_cast<const char*>(&v), 4); }
int32_t get_i32(const char* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
float get_f32(const char* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

bool keeps_tensor(const std::string& name, int rank, int size) {
  constexpr std::string_view kExperts = ".ffn.experts.";
  if (size <= 1 || name.rfind("layers.", 0) != 0) return true;
  const size_t at = name.find(kExperts);
  if (at == std::string::npos) return true;
  const int64_t e = std::strtoll(name.c_str() + at + kExperts.size(), nullptr, 10);
  return e % size == rank;
}

Status moe_forward_ep(const ModelContext& m, const std::string& p, bool hash, const float* h,
                      const int32_t* ids, int64_t n, float* out) {
  Collective& group = *m.expert_group;
  const Config& c = m.c;
  const int64_t H = c.hidden_size;
  const int E = c.n_routed_experts, K = c.experts_per_token, R = group.size();
  const size_t row_bytes = static_cast<size_t>(H) * sizeof(float);

  // Route (replicated router), then dispatch every (token, slot) to its expert's rank.
  std::vector<float> logits(n * E);
  if (n > 0) cpu::linear_fp32(m.f(p + "ffn.gate.weight"), E, H, h, n, logits.data());
  std::vector<int> idx(n * K);
  std::vector<float> wts(n * K);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t* hash_row = hash ? m.w.i(p + "ffn.gate.tid2eid") + int64_t(ids[t]) * K : nullptr;
    route_token(&logits[t * E], hash ? nullptr : m.f(p + "ffn.gate.bias"), hash_row, E, K,
                static_cast<float>(c.routed_scaling_factor), &idx[t * K], &wts[t * K]);
  }
  std::vector<std::string> send(R), recv;
  for (int64_t t = 0; t < n; ++t)
    for (int k = 0; k < K; ++k) {
      std::string& b = send[idx[t * K + k] % R];
      put_i32(&b, static_cast<int32_t>(t));
      put_i32(&b, k);
      put_i32(&b, idx[t * K + k]);
      put_f32(&b, wts[t * K + k]);
      b.append(reinterpret_cast<const char*>(h + t * H), row_bytes);
    }
  RETURN_IF_ERROR(group.all_to_all(send, &recv));

  // The pairs this rank's experts got, computed as moe_forward computes them.
  struct Pair {
    int src;
    const char* rec;
  };
  std::vector<Pair> pairs;
  for (int s = 0; s < R; ++s) {
    if (recv[s].size() % (kHead + row_bytes) != 0)
      return internal_error("expert dispatch from rank " + std::to_string(s) + ": " +
                            std::to_string(recv[s].size()) + " bytes is not whole records");
    for (size_t at = 0; at < recv[s].size(); at += kHead + row_bytes)
      pairs.push_back({s, recv[s].data() + at});
  }
  std::vector<float> results(pairs.size() * H, 0.0f);
  ThreadPool::default_pool().parallel_for(
      static_cast<int64_t>(pairs.size()), 1, [&](int64_t b, int64_t e) {
        std::vector<float> row(H);
        for (int64_t i = b; i < e; ++i) {
          const char* r = pairs[i].rec;
          std::memcpy(row.data(), r + kHead, row_bytes);
          expert_into(m, p + "ffn.experts." + std::to_string(get_i32(r + 8)) + ".",
                      c.moe_intermediate_size, row.data(), get_f32(r + 12), true, &results[i * H]);
        }
      });
  std::vector<std::string> back(R);
  for (size_t i = 0; i < pairs.size(); ++i) {
    std::string& b = back[pairs[i].src];
    b.append(pairs[i].rec, 8);  // token, slot
    b.append(reinterpret_cast<const char*>(&results[i * H]), row_bytes);
  }
  RETURN_IF_ERROR(group.all_to_all(back, &recv));

  // Combine: each token's slots in order, then the (replicated) shared expert.
  std::vector<float> contrib(n * K * H);
  std::vector<char> seen(n * K, 0);
  for (int s = 0; s < R; ++s)
    for (size_t at = 0; at + 8 + row_bytes <= recv[s].size(); at += 8 + row_bytes) {
      const int32_t t = get_i32(recv[s].data() + at), k = get_i32(recv[s].data() + at + 4);
      if (t < 0 || t >= n || k < 0 || k >= K || seen[t * K + k])
        return internal_error("expert combine from rank " + std::to_string(s) +
                              ": an unexpected (token, slot)");
      seen[t * K + k] = 1;
      std::memcpy(&contrib[(t * K + k) * H], recv[s].data() + at + 8, row_bytes);
    }
  for (int64_t i = 0; i < n * K; ++i)
    if (!seen[i])
      return internal_error("expert combine: token " + std::to_string(i / K) + " is missing slot " +
                            std::to_string(i % K));
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

#include "deepinfer/backend/cpu/expert_exchange.h"

#include <cstring>
#include <string>

#include "deepinfer/base/thread_pool.h"

namespace deepinfer::cpu {
namespace {

// Dispatch record: token, slot, expert, weight (4 x 4 bytes), then the token's hidden row.
// Combine record: token, slot, then the pair's output row.
constexpr size_t kHead = 16;

void put(std::string* s, const void* v, size_t n) { s->append(static_cast<const char*>(v), n); }
template <class T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

Status exchange_experts(Collective& group, const float* h, int64_t hidden, int64_t n, int K,
                        const std::vector<ExpertPair>& pairs, const ExpertCompute& compute,
                        float* contrib) {
  const int R = group.size();
  const size_t row = static_cast<size_t>(hidden) * sizeof(float);
  std::vector<std::string> send(R), recv;
  for (const ExpertPair& p : pairs) {
    if (p.rank < 0 || p.rank >= R)
      return internal_error("expert dispatch: expert " + std::to_string(p.expert) +
                            " sent to rank " + std::to_string(p.rank) + " of a group of " +
                            std::to_string(R));
    std::string& b = send[p.rank];
    put(&b, &p.token, 4);
    put(&b, &p.slot, 4);
    put(&b, &p.expert, 4);
    put(&b, &p.weight, 4);
    put(&b, h + p.token * hidden, row);
  }
  RETURN_IF_ERROR(group.all_to_all(send, &recv));

  struct Received {
    int src;
    const char* rec;
  };
  std::vector<Received> got;
  for (int s = 0; s < R; ++s) {
    if (recv[s].size() % (kHead + row) != 0)
      return internal_error("expert dispatch from rank " + std::to_string(s) + ": " +
                            std::to_string(recv[s].size()) + " bytes is not whole records");
    for (size_t at = 0; at < recv[s].size(); at += kHead + row)
      got.push_back({s, recv[s].data() + at});
  }
  std::vector<float> out(got.size() * hidden, 0.0f);
  ThreadPool::default_pool().parallel_for(
      static_cast<int64_t>(got.size()), 1, [&](int64_t b, int64_t e) {
        std::vector<float> x(hidden);
        for (int64_t i = b; i < e; ++i) {
          const char* r = got[i].rec;
          std::memcpy(x.data(), r + kHead, row);
          compute(get<int32_t>(r + 8), x.data(), get<float>(r + 12), &out[i * hidden]);
        }
      });
  std::vector<std::string> back(R);
  for (size_t i = 0; i < got.size(); ++i) {
    std::string& b = back[got[i].src];
    b.append(got[i].rec, 8);  // token, slot
    put(&b, &out[i * hidden], row);
  }
  RETURN_IF_ERROR(group.all_to_all(back, &recv));

  std::vector<char> seen(n * K, 0);
  for (int s = 0; s < R; ++s) {
    if (recv[s].size() % (8 + row) != 0)
      return internal_error("expert combine from rank " + std::to_string(s) +
                            ": not whole records");
    for (size_t at = 0; at < recv[s].size(); at += 8 + row) {
      const auto t = get<int32_t>(recv[s].data() + at), k = get<int32_t>(recv[s].data() + at + 4);
      if (t < 0 || t >= n || k < 0 || k >= K || seen[t * K + k])
        return internal_error("expert combine from rank " + std::to_string(s) +
                              ": an unexpected (token, slot)");
      seen[t * K + k] = 1;
      std::memcpy(contrib + (t * K + k) * hidden, recv[s].data() + at + 8, row);
    }
  }
  for (int64_t i = 0; i < n * K; ++i)
    if (!seen[i])
      return internal_error("expert combine: token " + std::to_string(i / K) + " is missing slot " +
                            std::to_string(i % K));
  return ok_status();
}

}  // namespace deepinfer::cpu

// power_of_two: the decode side's policy (SGLang's router's rule, with the load the issue asks
// for: KV pool usage and running sequences). Two random choices instead of the global minimum,
// so that workers whose /load is a poll old do not all draw the same burst.
#include <random>
#include <vector>

#include "deepinfer/router/policy.h"

namespace deepinfer::router {

double decode_load(const WorkerLoad& w) {
  if (!w.load_known) return static_cast<double>(w.outstanding);
  double seqs = static_cast<double>(w.num_running + w.num_waiting + w.outstanding);
  return w.kv_usage + seqs / static_cast<double>(std::max<int64_t>(w.max_num_seqs, 1));
}

namespace {

class PowerOfTwo : public Policy {
 public:
  explicit PowerOfTwo(uint64_t seed) : rng_(seed) {}

  std::optional<Pick> pick(std::string_view, std::span<const WorkerLoad> workers) override {
    std::vector<size_t> available;
    for (size_t w = 0; w < workers.size(); ++w)
      if (workers[w].available) available.push_back(w);
    if (available.empty()) return std::nullopt;
    if (available.size() == 1) return Pick{available[0]};
    size_t i = rng_() % available.size();
    size_t j = rng_() % (available.size() - 1);
    if (j >= i) ++j;
    size_t a = std::min(available[i], available[j]), b = std::max(available[i], available[j]);
    double la = decode_load(workers[a]), lb = decode_load(workers[b]);
    if (lb < la || (lb == la && workers[b].outstanding < workers[a].outstanding)) return Pick{b};
    return Pick{a};
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<Policy> make_power_of_two_policy(uint64_t seed) {
  return std::make_unique<PowerOfTwo>(seed);
}

}  // namespace deepinfer::router

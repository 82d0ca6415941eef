#include "deepinfer/router/policy.h"

#include <random>
#include <string>
#include <vector>

namespace deepinfer::router {

StatusOr<PolicyKind> parse_policy(std::string_view name) {
  if (name == "cache_aware") return PolicyKind::kCacheAware;
  if (name == "round_robin") return PolicyKind::kRoundRobin;
  if (name == "random") return PolicyKind::kRandom;
  return invalid_argument("--policy '" + std::string(name) +
                          "': one of cache_aware, round_robin, random");
}

std::string_view policy_name(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kCacheAware:
      return "cache_aware";
    case PolicyKind::kRoundRobin:
      return "round_robin";
    case PolicyKind::kRandom:
      return "random";
  }
  return "?";
}

namespace {

class RoundRobin : public Policy {
 public:
  // The first available worker at or after the cursor; the cursor then moves past it.
  std::optional<Pick> pick(std::string_view, std::span<const WorkerLoad> workers) override {
    for (size_t i = 0; i < workers.size(); ++i) {
      size_t w = (next_ + i) % workers.size();
      if (workers[w].available) {
        next_ = w + 1;
        return Pick{w};
      }
    }
    return std::nullopt;
  }

 private:
  size_t next_ = 0;
};

class Random : public Policy {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  std::optional<Pick> pick(std::string_view, std::span<const WorkerLoad> workers) override {
    std::vector<size_t> available;
    for (size_t w = 0; w < workers.size(); ++w)
      if (workers[w].available) available.push_back(w);
    if (available.empty()) return std::nullopt;
    return Pick{available[rng_() % available.size()]};
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<Policy> make_round_robin_policy() { return std::make_unique<RoundRobin>(); }
std::unique_ptr<Policy> make_random_policy(uint64_t seed) { return std::make_unique<Random>(seed); }

std::unique_ptr<Policy> make_policy(PolicyKind kind, size_t num_workers, uint64_t seed) {
  switch (kind) {
    case PolicyKind::kCacheAware:
      return make_cache_aware_policy(num_workers, CacheAwareConfig{});
    case PolicyKind::kRoundRobin:
      return make_round_robin_policy();
    case PolicyKind::kRandom:
      return make_random_policy(seed);
  }
  return nullptr;
}

}  // namespace deepinfer::router

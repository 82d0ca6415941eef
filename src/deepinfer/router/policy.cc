#include "deepinfer/router/policy.h"

#include <random>
#include <string>
#include <vector>

namespace deepinfer::router {

StatusOr<PolicyKind> parse_policy(std::string_view name, std::string_view flag) {
  if (name == "cache_aware") return PolicyKind::kCacheAware;
  if (name == "round_robin") return PolicyKind::kRoundRobin;
  if (name == "random") return PolicyKind::kRandom;
  if (name == "power_of_two") return PolicyKind::kPowerOfTwo;
  return invalid_argument(std::string(flag) + " '" + std::string(name) +
                          "': one of cache_aware, round_robin, random, power_of_two");
}

std::string_view policy_name(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kCacheAware:
      return "cache_aware";
    case PolicyKind::kRoundRobin:
      return "round_robin";
    case PolicyKind::kRandom:
      return "random";
    case PolicyKind::kPowerOfTwo:
      return "power_of_two";
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

std::unique_ptr<Policy> make_policy(PolicyKind kind, uint64_t seed, bool prefill) {
  switch (kind) {
    case PolicyKind::kCacheAware: {
      CacheAwareConfig config;
      if (prefill) {
        config.balance_on_prefill_tokens = true;
        config.balance_abs_threshold = kPrefillTokensAbsThreshold;
      }
      return make_cache_aware_policy(config);
    }
    case PolicyKind::kPowerOfTwo:
      return make_power_of_two_policy(seed);
    case PolicyKind::kRoundRobin:
      return make_round_robin_policy();
    case PolicyKind::kRandom:
      return make_random_policy(seed);
  }
  return nullptr;
}

}  // namespace deepinfer::router

// Which worker serves a request. A policy sees each worker's load and whether it may be picked
// (healthy, and not already tried by this request), never the network.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "deepinfer/base/status.h"

namespace deepinfer::router {

enum class PolicyKind { kCacheAware, kRoundRobin, kRandom };

// "cache_aware", "round_robin", "random"; an error names --policy and the value.
StatusOr<PolicyKind> parse_policy(std::string_view name);
std::string_view policy_name(PolicyKind kind);

struct WorkerLoad {
  bool available = true;    // healthy and not yet tried by this request
  int64_t outstanding = 0;  // requests sent to it and not yet finished
};

struct Pick {
  size_t worker = 0;
  bool cache_hit = false;  // cache_aware: chosen for the prefix it has served
};

class Policy {
 public:
  virtual ~Policy() = default;
  // The worker for a request whose routing text (the prompt) is `text`; none when no worker is
  // available.
  virtual std::optional<Pick> pick(std::string_view text, std::span<const WorkerLoad> workers) = 0;
  // The worker's cache is gone: it was ejected, and may come back restarted.
  virtual void forget(size_t /*worker*/) {}
};

// SGLang's router's defaults: route by prefix while loads are balanced; when the busiest worker
// has more than abs_threshold and rel_threshold times the idlest one's outstanding requests,
// route to the idlest.
struct CacheAwareConfig {
  double cache_threshold = 0.5;  // matched share of the prompt above which the prefix decides
  int64_t balance_abs_threshold = 32;
  double balance_rel_threshold = 1.5;
  size_t max_tree_chars = size_t{1} << 24;  // per worker (PrefixIndex)
};

std::unique_ptr<Policy> make_round_robin_policy();
// Uniform among the available workers: std::mt19937_64(seed)() % count.
std::unique_ptr<Policy> make_random_policy(uint64_t seed);
std::unique_ptr<Policy> make_cache_aware_policy(size_t num_workers, CacheAwareConfig config);

std::unique_ptr<Policy> make_policy(PolicyKind kind, size_t num_workers, uint64_t seed);

}  // namespace deepinfer::router

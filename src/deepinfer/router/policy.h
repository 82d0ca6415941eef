// Which worker serves a request. A policy sees each worker's load and whether it may be picked
// (healthy, registered, and not already tried by this request), never the network.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "deepinfer/base/status.h"

namespace deepinfer::router {

enum class PolicyKind { kCacheAware, kRoundRobin, kRandom, kPowerOfTwo };

// "cache_aware", "round_robin", "random", "power_of_two"; an error names `flag` and the value.
StatusOr<PolicyKind> parse_policy(std::string_view name, std::string_view flag = "--policy");
std::string_view policy_name(PolicyKind kind);

struct WorkerLoad {
  bool available = true;    // healthy, registered and not yet tried by this request
  int64_t outstanding = 0;  // requests the router sent to it and not yet finished
  // The router's estimate of prompt tokens in prefill at the worker: the routing text's bytes
  // / 4 of each outstanding prefill (PD phase 1) request.
  int64_t pending_prefill_tokens = 0;
  // From the worker's latest GET /load (polled with the health checks); false until one is read.
  bool load_known = false;
  double kv_usage = 0;  // pool pages in use / pool, [0, 1]
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  int64_t max_num_seqs = 0;
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
  // The worker's cache is gone: it was ejected or left, and may come back restarted.
  virtual void forget(size_t /*worker*/) {}
};

// SGLang's router's defaults: route by prefix while loads are balanced; when the busiest worker
// has more than abs_threshold and rel_threshold times the idlest one's load, route to the
// idlest. Load is outstanding requests, or with balance_on_prefill_tokens (the prefill side of
// PD) pending prefill tokens.
struct CacheAwareConfig {
  double cache_threshold = 0.5;  // matched share of the prompt above which the prefix decides
  int64_t balance_abs_threshold = 32;
  double balance_rel_threshold = 1.5;
  bool balance_on_prefill_tokens = false;
  size_t max_tree_chars = size_t{1} << 24;  // per worker (PrefixIndex)
};
// The prefill side's absolute threshold: 32 requests of about 256 prompt tokens.
inline constexpr int64_t kPrefillTokensAbsThreshold = 8192;

std::unique_ptr<Policy> make_round_robin_policy();
// Uniform among the available workers: std::mt19937_64(seed)() % count.
std::unique_ptr<Policy> make_random_policy(uint64_t seed);
std::unique_ptr<Policy> make_cache_aware_policy(CacheAwareConfig config);

// power_of_two (decode): two distinct available workers drawn at random, the less loaded one
// kept. With the available workers a[0..n) in index order and rng = std::mt19937_64(seed):
// i = rng() % n, j = rng() % (n - 1), j += (j >= i); n == 1 draws nothing. The load is
//   decode_load(w) = kv_usage + (num_running + num_waiting + outstanding) / max_num_seqs
// with the /load fields of the worker's latest poll; a worker whose /load is unknown counts
// kv_usage = num_running = num_waiting = 0 and max_num_seqs = 1 (its outstanding requests
// alone). Ties: fewer outstanding, then the lower index.
std::unique_ptr<Policy> make_power_of_two_policy(uint64_t seed);
double decode_load(const WorkerLoad& w);

// cache_aware balances on pending prefill tokens when `prefill` (PD's prefill side).
std::unique_ptr<Policy> make_policy(PolicyKind kind, uint64_t seed, bool prefill = false);

}  // namespace deepinfer::router

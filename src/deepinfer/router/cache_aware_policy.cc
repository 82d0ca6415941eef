// cache_aware: SGLang's router's rule over PrefixIndex. Loads balanced: the worker that has served
// the longest prefix of the prompt, if that prefix is more than cache_threshold of it, else the
// worker holding the smallest tree (the most room). Loads imbalanced: the idlest worker (load:
// outstanding requests, or pending prefill tokens on PD's prefill side). Ties go
// to fewer outstanding requests, then the lower index. The chosen worker records the prompt.
#include <limits>

#include "deepinfer/router/policy.h"
#include "deepinfer/router/prefix_index.h"

namespace deepinfer::router {

namespace {

class CacheAware : public Policy {
 public:
  explicit CacheAware(CacheAwareConfig config)
      : config_(config), index_(0, config.max_tree_chars) {}

  std::optional<Pick> pick(std::string_view text, std::span<const WorkerLoad> workers) override {
    index_.ensure_workers(workers.size());
    auto load = [&](const WorkerLoad& w) {
      return config_.balance_on_prefill_tokens ? w.pending_prefill_tokens : w.outstanding;
    };
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = -1;
    for (const auto& w : workers) {
      if (!w.available) continue;
      lo = std::min(lo, load(w));
      hi = std::max(hi, load(w));
    }
    if (hi < 0) return std::nullopt;
    bool imbalanced = hi - lo > config_.balance_abs_threshold &&
                      static_cast<double>(hi) > config_.balance_rel_threshold * lo;
    Pick pick;
    if (imbalanced) {
      pick.worker = best(workers, [&](size_t i) { return static_cast<double>(load(workers[i])); });
    } else {
      std::vector<size_t> matched = index_.match(text);
      size_t w = best(workers, [&](size_t i) { return -static_cast<double>(matched[i]); });
      double rate = text.empty() ? 0.0 : static_cast<double>(matched[w]) / text.size();
      if (rate > config_.cache_threshold) {
        pick = {w, true};
      } else {
        pick.worker = best(workers, [&](size_t i) { return static_cast<double>(index_.chars(i)); });
      }
    }
    index_.insert(text, pick.worker);
    return pick;
  }

  void forget(size_t worker) override { index_.remove_worker(worker); }

 private:
  // The available worker with the lowest key, then fewest outstanding, then lowest index.
  template <typename Key>
  size_t best(std::span<const WorkerLoad> workers, Key key) const {
    size_t chosen = workers.size();
    for (size_t i = 0; i < workers.size(); ++i) {
      if (!workers[i].available) continue;
      if (chosen == workers.size()) {
        chosen = i;
        continue;
      }
      double a = key(i), b = key(chosen);
      if (a < b || (a == b && workers[i].outstanding < workers[chosen].outstanding)) chosen = i;
    }
    return chosen;
  }

  CacheAwareConfig config_;
  PrefixIndex index_;
};

}  // namespace

std::unique_ptr<Policy> make_cache_aware_policy(CacheAwareConfig config) {
  return std::make_unique<CacheAware>(config);
}

}  // namespace deepinfer::router

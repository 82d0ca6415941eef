// The prefix cache's figures as /metrics reports them (engine.h's PrefixCacheStats): the device
// tier's from the engine thread's PrefixCacheMetrics, the lower tiers' from kv::UnitTiers.
#pragma once

#include <cstdint>

#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/prefix_caching.h"

namespace deepinfer {

// enabled, queried and hit tokens, loads, and the device tier (index 0) of `m`.
PrefixCacheStats device_cache_stats(const PrefixCacheMetrics& m, int64_t page_bytes);
// The host, disk and cluster tiers' figures (indices 1..3) and the tiers' error counts.
void add_tier_stats(const kv::UnitTiersStats& t, PrefixCacheStats* c);

}  // namespace deepinfer

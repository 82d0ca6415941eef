#include "deepinfer/engine/prefix_cache_stats.h"

namespace deepinfer {

PrefixCacheStats device_cache_stats(const PrefixCacheMetrics& m, int64_t page_bytes) {
  PrefixCacheStats c;
  c.enabled = true;
  c.queried_tokens = m.queried_tokens;
  for (int t = 0; t < kv::kNumTiers; ++t) c.hit_tokens[t] = m.hit_tokens[t];
  c.loads = m.loads;
  c.load_seconds = m.load_seconds;
  c.promoted_bytes = m.promoted_bytes;
  c.units[0] = m.device.units;
  c.bytes[0] = m.device.pages * page_bytes;
  c.evicted_capacity[0] = m.device.evicted_capacity;
  c.evicted_expired[0] = m.device.evicted_expired;
  return c;
}

void add_tier_stats(const kv::UnitTiersStats& t, PrefixCacheStats* c) {
  c->units[1] = t.host.units;
  c->bytes[1] = t.host.bytes;
  c->bytes_written[1] = t.host.bytes_written;
  c->bytes_read[1] = t.host.bytes_read;
  c->evicted_capacity[1] = t.host.evicted_capacity;
  c->evicted_expired[1] = t.host.evicted_expired;
  const kv::DiskTierStats* lower[2] = {&t.disk, &t.cluster};
  for (int i = 0; i < 2; ++i) {
    c->units[2 + i] = lower[i]->units;
    c->bytes[2 + i] = lower[i]->bytes;
    c->bytes_written[2 + i] = lower[i]->bytes_written;
    c->bytes_read[2 + i] = lower[i]->bytes_read;
    c->evicted_capacity[2 + i] = lower[i]->evicted_capacity;
    c->evicted_expired[2 + i] = lower[i]->evicted_expired;
    c->corrupt_dropped += lower[i]->corrupt_dropped;
  }
  c->write_errors = t.write_errors;
  c->writes_dropped = t.writes_dropped;
  c->redis_healthy = t.redis_healthy;
}

}  // namespace deepinfer

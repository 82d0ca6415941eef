// The host-memory tier of the prefix cache: unit records in process memory up to a byte
// capacity, least recently used evicted first, expired units dropped. Thread-safe (the engine
// thread reads and writes it; a background writer copies from it to the disk tiers).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "deepinfer/base/clock.h"
#include "deepinfer/kv/unit_record.h"

namespace deepinfer::kv {

struct HostTierStats {
  int64_t units = 0, bytes = 0, capacity_bytes = 0;
  int64_t bytes_written = 0, bytes_read = 0, hits = 0, misses = 0;
  int64_t evicted_expired = 0, evicted_capacity = 0;
};

class HostTier {
 public:
  HostTier(int64_t capacity_bytes, const Clock* clock);

  // Stores (or replaces) the unit, then evicts LRU units down to capacity; a unit larger than
  // the whole capacity is not stored (false).
  bool put(std::shared_ptr<const UnitRecord> record);
  // null: absent or expired. A hit marks the unit most recently used.
  std::shared_ptr<const UnitRecord> get(const UnitKey& key);
  // Without touching the LRU order: what a longest-prefix walk asks.
  bool contains(const UnitKey& key, bool with_snapshot = false) const;
  // Extends expiry (never shortens) and marks the unit used.
  void touch(const UnitKey& key, int64_t expires_at_s);
  // Drops expired units; returns how many.
  int64_t sweep();
  HostTierStats stats() const;

 private:
  struct Entry {
    std::shared_ptr<const UnitRecord> record;
    int64_t expires_at_s = 0;  // the record's, as extended by touch()
    std::list<UnitKey>::iterator lru;
  };
  using Index = std::unordered_map<UnitKey, Entry, UnitKeyHash>;
  void erase_locked(Index::iterator it);

  const int64_t capacity_;
  const Clock* clock_;
  mutable std::mutex mu_;
  Index index_;
  std::list<UnitKey> lru_;  // front: least recently used
  HostTierStats stats_;
};

}  // namespace deepinfer::kv

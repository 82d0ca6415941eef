// The device tier of the prefix cache: units (one block's growing-state page, plus at persistence
// points a snapshot of the constant pages at the block's end) held in pool pages by reference
// count, beside the sequences that use them. A unit whose page only the cache holds is
// evictable, least recently used first; one a running sequence holds is not, but its snapshot
// (held by the cache alone) is, after every evictable unit. Pure bookkeeping
// over the KvManager's BlockPool; KvManager is its only user and tells it when a cached page
// gains or loses its last sequence holder.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "deepinfer/kv/block_pool.h"
#include "deepinfer/kv/unit_key.h"
#include "deepinfer/kv/unit_record.h"

namespace deepinfer::kv {

struct PrefixCacheStats {
  int64_t units = 0, snapshots = 0, pages = 0, evictable_pages = 0;
  int64_t evicted_capacity = 0, evicted_expired = 0;  // units, running totals
};

// What a lookup found: units [0, num_units) of the chain are cached and unit num_units - 1 has
// a snapshot, so a sequence can start at end_tokens.
struct PrefixMatch {
  int64_t num_units = 0;
  int64_t end_tokens = 0;
};

class PrefixCache {
 public:
  struct Unit {
    UnitKey key, parent;
    int64_t end_tokens = 0;
    int32_t page = -1;
    std::vector<int32_t> snapshot;  // empty or constant_pages pages, held by the cache alone
    int64_t expires_at_s = 0;
    Retention retention = Retention::kChat;
    bool evictable = false;  // page held by the cache alone; then in lru_
    std::list<UnitKey>::iterator lru_pos;
  };

  explicit PrefixCache(BlockPool* pool) : pool_(pool) {}
  void rebind(BlockPool* pool) { pool_ = pool; }  // the owning KvManager moved

  // The longest usable prefix of `keys` at most `max_tokens` long, ignoring units expired at
  // `now_s`.
  PrefixMatch match(std::span<const UnitKey> keys, int64_t max_tokens, int64_t now_s) const;
  const Unit* find(const UnitKey& k) const;

  // Inserts a unit over `page`, which a sequence holds (the cache adds its own reference).
  // Returns false, changing nothing, when the key is already cached.
  bool insert(const UnitKey& key, const UnitKey& parent, int64_t end_tokens, int32_t page,
              int64_t expires_at_s, Retention r);
  // Attaches snapshot pages (allocated by the caller, refcount 1) to a cached unit.
  void set_snapshot(const UnitKey& key, std::vector<int32_t> pages);
  // Extends expiry (never shortens) and marks the unit most recently used.
  void touch(const UnitKey& key, int64_t expires_at_s);

  // KvManager's notifications: a cached page's holders other than the cache went 0 -> 1 / 1 -> 0.
  bool is_cached_page(int32_t page) const { return page_unit_.count(page) != 0; }
  void on_page_referenced(int32_t page);
  void on_page_unreferenced(int32_t page);

  // Evicts least recently used evictable units, then snapshots of units sequences hold (except
  // protected ones), until `pages` pages were freed or nothing is left; returns the pages freed.
  int64_t evict(int64_t pages);
  // A snapshot whose copies into a starting sequence are pending (in the plan being built) is
  // not evicted until clear_protected().
  void protect(const UnitKey& key);
  void clear_protected() {
    protected_.clear();
    protected_pages_ = 0;
  }
  // Drops every unit expired at now_s (a unit still in use loses only the cache's references).
  int64_t expire(int64_t now_s);
  // Drops one unit (e.g. a promotion whose page write failed); false if not cached.
  bool drop(const UnitKey& key);
  // Drops a unit's snapshot only.
  void drop_snapshot(const UnitKey& key);

  // Pages evict() can free: evictable units' pages and unprotected snapshot pages.
  int64_t evictable_pages() const { return evictable_pages_ - protected_pages_; }
  PrefixCacheStats stats() const;

 private:
  int64_t unit_pages(const Unit& u) const { return 1 + static_cast<int64_t>(u.snapshot.size()); }
  void make_evictable(Unit& u);
  void make_referenced(Unit& u);
  void erase(std::unordered_map<UnitKey, Unit, UnitKeyHash>::iterator it);

  BlockPool* pool_;
  std::unordered_map<UnitKey, Unit, UnitKeyHash> units_;
  std::unordered_map<int32_t, UnitKey> page_unit_;
  std::list<UnitKey> lru_;  // evictable units, least recently used first
  std::vector<UnitKey> protected_;
  int64_t protected_pages_ = 0;
  int64_t evictable_pages_ = 0;
  int64_t pages_ = 0;  // held by the cache: units' pages and snapshots
  int64_t snapshots_ = 0;
  int64_t evicted_capacity_ = 0, evicted_expired_ = 0;
};

}  // namespace deepinfer::kv

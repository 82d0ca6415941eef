#include "deepinfer/kv/prefix_cache.h"

#include <algorithm>

#include "deepinfer/base/check.h"

namespace deepinfer::kv {

PrefixMatch PrefixCache::match(std::span<const UnitKey> keys, int64_t max_tokens,
                               int64_t now_s) const {
  PrefixMatch m;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = units_.find(keys[i]);
    if (it == units_.end() || it->second.expires_at_s <= now_s) break;
    const Unit& u = it->second;
    if (u.end_tokens > max_tokens) break;
    if (!u.snapshot.empty()) m = {static_cast<int64_t>(i) + 1, u.end_tokens};
  }
  return m;
}

const PrefixCache::Unit* PrefixCache::find(const UnitKey& k) const {
  auto it = units_.find(k);
  return it == units_.end() ? nullptr : &it->second;
}

bool PrefixCache::insert(const UnitKey& key, const UnitKey& parent, int64_t end_tokens,
                         int32_t page, int64_t expires_at_s, Retention r) {
  if (units_.count(key)) return false;
  DI_CHECK(!page_unit_.count(page));  // a page backs at most one unit
  pool_->retain(page);
  Unit u;
  u.key = key;
  u.parent = parent;
  u.end_tokens = end_tokens;
  u.page = page;
  u.expires_at_s = expires_at_s;
  u.retention = r;
  auto [it, ok] = units_.emplace(key, std::move(u));
  ++pages_;
  page_unit_.emplace(page, key);
  // Inserted by its only other holder's request: refcount 2 unless that holder is gone.
  if (pool_->refcount(page) == 1) make_evictable(it->second);
  return true;
}

void PrefixCache::set_snapshot(const UnitKey& key, std::vector<int32_t> pages) {
  Unit& u = units_.at(key);
  DI_CHECK(u.snapshot.empty());
  evictable_pages_ += static_cast<int64_t>(pages.size());
  pages_ += static_cast<int64_t>(pages.size());
  u.snapshot = std::move(pages);
  ++snapshots_;
}

void PrefixCache::touch(const UnitKey& key, int64_t expires_at_s) {
  auto it = units_.find(key);
  if (it == units_.end()) return;
  Unit& u = it->second;
  u.expires_at_s = std::max(u.expires_at_s, expires_at_s);
  if (u.evictable) lru_.splice(lru_.end(), lru_, u.lru_pos);
}

void PrefixCache::make_evictable(Unit& u) {
  DI_CHECK(!u.evictable);
  u.evictable = true;
  u.lru_pos = lru_.insert(lru_.end(), u.key);
  ++evictable_pages_;
}

void PrefixCache::make_referenced(Unit& u) {
  DI_CHECK(u.evictable);
  u.evictable = false;
  lru_.erase(u.lru_pos);
  --evictable_pages_;
}

void PrefixCache::on_page_referenced(int32_t page) {
  make_referenced(units_.at(page_unit_.at(page)));
}

void PrefixCache::on_page_unreferenced(int32_t page) {
  make_evictable(units_.at(page_unit_.at(page)));
}

void PrefixCache::erase(std::unordered_map<UnitKey, Unit, UnitKeyHash>::iterator it) {
  Unit& u = it->second;
  if (u.evictable) make_referenced(u);  // out of the LRU list and the evictable count
  if (!u.snapshot.empty()) --snapshots_;
  evictable_pages_ -= static_cast<int64_t>(u.snapshot.size());
  pages_ -= unit_pages(u);
  for (int32_t p : u.snapshot) pool_->release(p);
  page_unit_.erase(u.page);
  pool_->release(u.page);
  units_.erase(it);
}

void PrefixCache::protect(const UnitKey& key) {
  const Unit* u = find(key);
  if (u == nullptr || u->snapshot.empty() ||
      std::find(protected_.begin(), protected_.end(), key) != protected_.end())
    return;
  protected_.push_back(key);
  protected_pages_ += static_cast<int64_t>(u->snapshot.size());
}

int64_t PrefixCache::evict(int64_t pages) {
  int64_t freed = 0;
  while (freed < pages && !lru_.empty()) {
    auto it = units_.find(lru_.front());
    freed += unit_pages(it->second);
    erase(it);
    ++evicted_capacity_;
  }
  // Then snapshots of units running sequences hold: without this a long prompt's own
  // snapshots would leave it no room to grow.
  for (auto it = units_.begin(); freed < pages && it != units_.end(); ++it) {
    Unit& u = it->second;
    if (u.snapshot.empty() ||
        std::find(protected_.begin(), protected_.end(), u.key) != protected_.end())
      continue;
    freed += static_cast<int64_t>(u.snapshot.size());
    drop_snapshot(u.key);
    ++evicted_capacity_;
  }
  return freed;
}

int64_t PrefixCache::expire(int64_t now_s) {
  int64_t n = 0;
  for (auto it = units_.begin(); it != units_.end();) {
    auto next = std::next(it);
    if (it->second.expires_at_s <= now_s) {
      erase(it);
      ++n;
    }
    it = next;
  }
  evicted_expired_ += n;
  return n;
}

bool PrefixCache::drop(const UnitKey& key) {
  auto it = units_.find(key);
  if (it == units_.end()) return false;
  erase(it);
  return true;
}

void PrefixCache::drop_snapshot(const UnitKey& key) {
  auto it = units_.find(key);
  if (it == units_.end() || it->second.snapshot.empty()) return;
  Unit& u = it->second;
  evictable_pages_ -= static_cast<int64_t>(u.snapshot.size());
  pages_ -= static_cast<int64_t>(u.snapshot.size());
  for (int32_t p : u.snapshot) pool_->release(p);
  u.snapshot.clear();
  --snapshots_;
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s;
  s.units = static_cast<int64_t>(units_.size());
  s.snapshots = snapshots_;
  s.pages = pages_;
  s.evictable_pages = evictable_pages_;
  s.evicted_capacity = evicted_capacity_;
  s.evicted_expired = evicted_expired_;
  return s;
}

}  // namespace deepinfer::kv

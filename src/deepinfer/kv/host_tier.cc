#include "deepinfer/kv/host_tier.h"

#include <algorithm>

namespace deepinfer::kv {

HostTier::HostTier(int64_t capacity_bytes, const Clock* clock)
    : capacity_(std::max<int64_t>(0, capacity_bytes)),
      clock_(clock ? clock : &SystemClock::instance()) {
  stats_.capacity_bytes = capacity_;
}

void HostTier::erase_locked(Index::iterator it) {
  stats_.bytes -= it->second.record->bytes();
  --stats_.units;
  lru_.erase(it->second.lru);
  index_.erase(it);
}

bool HostTier::put(std::shared_ptr<const UnitRecord> record) {
  if (record->bytes() > capacity_) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(record->key); it != index_.end()) erase_locked(it);
  Entry e;
  e.expires_at_s = record->expires_at_s;
  e.lru = lru_.insert(lru_.end(), record->key);
  stats_.bytes += record->bytes();
  stats_.bytes_written += record->bytes();
  ++stats_.units;
  const UnitKey key = record->key;
  e.record = std::move(record);
  index_.emplace(key, std::move(e));
  while (stats_.bytes > capacity_) {
    erase_locked(index_.find(lru_.front()));
    ++stats_.evicted_capacity;
  }
  return true;
}

std::shared_ptr<const UnitRecord> HostTier::get(const UnitKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it != index_.end() && it->second.expires_at_s <= clock_->now_unix_s()) {
    erase_locked(it);
    ++stats_.evicted_expired;
    it = index_.end();
  }
  if (it == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  stats_.bytes_read += it->second.record->bytes();
  lru_.splice(lru_.end(), lru_, it->second.lru);
  return it->second.record;
}

bool HostTier::contains(const UnitKey& key, bool with_snapshot) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  return it != index_.end() && it->second.expires_at_s > clock_->now_unix_s() &&
         (!with_snapshot || it->second.record->has_snapshot());
}

void HostTier::touch(const UnitKey& key, int64_t expires_at_s) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return;
  it->second.expires_at_s = std::max(it->second.expires_at_s, expires_at_s);
  lru_.splice(lru_.end(), lru_, it->second.lru);
}

int64_t HostTier::sweep() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_->now_unix_s();
  int64_t n = 0;
  for (auto it = index_.begin(); it != index_.end();) {
    auto next = std::next(it);
    if (it->second.expires_at_s <= now) {
      erase_locked(it);
      ++n;
    }
    it = next;
  }
  stats_.evicted_expired += n;
  return n;
}

HostTierStats HostTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace deepinfer::kv

#include "deepinfer/disagg/handoff_store.h"

#include <random>

namespace deepinfer::disagg {

namespace {
std::string random_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (int half = 0; half < 2; ++half) {
    uint64_t v = rng();
    for (int i = 0; i < 16; ++i, v >>= 4) id[static_cast<size_t>(half * 16 + i)] = kHex[v & 15];
  }
  return id;
}
}  // namespace

HandoffStore::HandoffStore(HandoffStoreOptions o) : o_(o) {
  if (o_.clock == nullptr) o_.clock = &SystemClock::instance();
}

int64_t HandoffStore::now() const { return o_.clock->now_unix_s(); }

void HandoffStore::sweep_locked(int64_t t) {
  for (auto it = by_id_.begin(); it != by_id_.end();) {
    if (it->second->expires_at_s > t) {
      ++it;
      continue;
    }
    stats_.bytes -= it->second->bytes();
    --stats_.handoffs;
    ++stats_.expired;
    it = by_id_.erase(it);
  }
}

StatusOr<std::string> HandoffStore::put(std::string meta, std::string payload,
                                        std::shared_ptr<void> keep) {
  auto h = std::make_shared<Handoff>();
  h->meta = std::move(meta);
  h->payload = std::move(payload);
  h->keep = std::move(keep);
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t t = now();
  h->expires_at_s = t + o_.ttl_s;
  if (stats_.bytes + h->bytes() > o_.capacity_bytes) sweep_locked(t);
  if (stats_.bytes + h->bytes() > o_.capacity_bytes) {
    ++stats_.refused_full;
    return resource_exhausted("the handoff store is full (" + std::to_string(stats_.bytes) +
                              " of --disagg-handoff-bytes " + std::to_string(o_.capacity_bytes) +
                              " bytes held by states no decode worker fetched yet)");
  }
  std::string id = random_id();
  stats_.bytes += h->bytes();
  ++stats_.handoffs;
  ++stats_.stored;
  by_id_[id] = std::move(h);
  return id;
}

std::shared_ptr<const Handoff> HandoffStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end() || it->second->expires_at_s <= now()) return nullptr;
  return it->second;
}

void HandoffStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  stats_.bytes -= it->second->bytes();
  --stats_.handoffs;
  ++stats_.taken;
  by_id_.erase(it);
}

void HandoffStore::sweep() {
  std::lock_guard<std::mutex> lock(mu_);
  sweep_locked(now());
}

HandoffStoreStats HandoffStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace deepinfer::disagg

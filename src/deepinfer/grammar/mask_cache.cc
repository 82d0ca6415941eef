#include "deepinfer/grammar/mask_cache.h"

#include <algorithm>

namespace deepinfer::grammar {

MaskCache::MaskCache(int32_t mask_words, size_t max_bytes)
    : mask_words_(mask_words),
      max_entries_(std::max<size_t>(1, max_bytes / (sizeof(uint32_t) * std::max(1, mask_words)))) {
  // Address space only (pages are touched as masks arrive): growing by copying would stall a
  // mask for milliseconds once the cache holds megabytes.
  masks_.reserve(max_entries_ * static_cast<size_t>(mask_words_));
}

void MaskCache::clear_all() {
  index_.clear();
  keys_.clear();
  masks_.clear();
  dfa_.clear();
  ids_.clear();
}

uint64_t MaskCache::hash(const std::vector<uint32_t>& key) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ key.size();
  for (uint32_t v : key) {
    h ^= v;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  return h;
}

const uint32_t* MaskCache::find(const std::vector<uint32_t>& key, uint64_t h) const {
  auto [lo, hi] = index_.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    if (keys_[it->second] == key) {
      ++hits;
      return masks_.data() + static_cast<size_t>(it->second) * mask_words_;
    }
  }
  ++misses;
  return nullptr;
}

void MaskCache::insert(const std::vector<uint32_t>& key, uint64_t h, const uint32_t* mask) {
  if (keys_.size() >= max_entries_) {
    index_.clear();
    keys_.clear();
    masks_.clear();
  }
  uint32_t e = static_cast<uint32_t>(keys_.size());
  keys_.push_back(key);
  masks_.insert(masks_.end(), mask, mask + mask_words_);
  index_.emplace(h, e);
}

}  // namespace deepinfer::grammar

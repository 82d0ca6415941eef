#include "deepinfer/grammar/continuation_ids.h"

#include "deepinfer/grammar/mask_cache.h"

namespace deepinfer::grammar {

size_t ContinuationIds::Hash::operator()(const std::vector<uint32_t>& k) const {
  return static_cast<size_t>(MaskCache::hash(k));
}

uint32_t ContinuationIds::intern(const std::vector<uint32_t>& encoding) {
  auto [it, inserted] = ids_.try_emplace(encoding, static_cast<uint32_t>(ids_.size()));
  if (inserted) words_ += encoding.size();
  return it->second;
}

void ContinuationIds::clear() {
  ids_.clear();
  words_ = 0;
  ++generation_;
}

}  // namespace deepinfer::grammar

#include "deepinfer/grammar/byte_dfa.h"

#include "deepinfer/grammar/mask_cache.h"

namespace deepinfer::grammar {

size_t ByteDfa::KeyHash::operator()(const std::vector<uint32_t>& k) const {
  return static_cast<size_t>(MaskCache::hash(k));
}

int32_t ByteDfa::intern(const std::vector<uint32_t>& key, const ByteSet& allowed) {
  auto [it, inserted] = ids_.try_emplace(key, static_cast<int32_t>(num_states()));
  if (inserted) {
    // Address space for the usual bound (GrammarMatcher clears past 4096 states between walks),
    // so the table is not copied while it grows.
    if (trans_.capacity() == 0) trans_.reserve(size_t{4160} * 256);
    trans_.resize(trans_.size() + 256, kUnknown);
    run_info_.emplace_back();
    run_known_.push_back(0);
    int32_t* row = trans_.data() + trans_.size() - 256;
    for (int b = 0; b < 256; ++b) {
      if (!allowed.test(b)) row[b] = kDead;
    }
  }
  return it->second;
}

void ByteDfa::clear() {
  ids_.clear();
  trans_.clear();
  run_info_.clear();
  run_known_.clear();
}

}  // namespace deepinfer::grammar

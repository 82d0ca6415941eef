// What matchers of one grammar and tokenizer learn and share: token masks memoized by matcher
// state (EarleyMatcher::state_key), and the byte DFA over those same states. A key fixes
// everything the future depends on, so a hit is exact, never a guess. Inside a string, a
// repeated array element or a repeated object member the state recurs, and its mask is a copy
// instead of a walk. Not thread-safe: share it only among matchers used on one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "deepinfer/grammar/byte_dfa.h"
#include "deepinfer/grammar/continuation_ids.h"

namespace deepinfer::grammar {

class MaskCache {
 public:
  // Holds at most max_bytes of masks; when full it starts over (states recur locally, so a
  // recent working set refills quickly).
  MaskCache(int32_t mask_words, size_t max_bytes);

  static uint64_t hash(const std::vector<uint32_t>& key);
  // The cached mask for key, or nullptr.
  const uint32_t* find(const std::vector<uint32_t>& key, uint64_t h) const;
  void insert(const std::vector<uint32_t>& key, uint64_t h, const uint32_t* mask);

  int32_t mask_words() const { return mask_words_; }
  ByteDfa& dfa() { return dfa_; }
  // The ids the keys of masks and DFA states are made with (compact_state_key).
  ContinuationIds& continuation_ids() { return ids_; }
  // Forgets masks, DFA and ids together (keys name ids); only between walks.
  void clear_all();
  size_t size() const { return keys_.size(); }
  mutable int64_t hits = 0, misses = 0;
  int64_t fast_walks = 0;      // misses whose walk took the text fast path
  int64_t dead_end_walks = 0;  // fast walks that also skipped the run's longer text tokens
  int64_t walked_tokens = 0;   // tokens the walks stepped (not decided by the fast path)

 private:
  int32_t mask_words_;
  size_t max_entries_;
  std::unordered_multimap<uint64_t, uint32_t> index_;  // hash -> entry
  std::vector<std::vector<uint32_t>> keys_;
  std::vector<uint32_t> masks_;  // entry e at [e * mask_words_, (e + 1) * mask_words_)
  ByteDfa dfa_;
  ContinuationIds ids_;
};

}  // namespace deepinfer::grammar

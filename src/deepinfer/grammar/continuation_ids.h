// Interned continuations for compact matcher state keys (EarleyMatcher::compact_state_key).
// A continuation is what completing a rule r back into an older Earley set j can still lead to:
// the items of j waiting on r and, transitively, theirs. Its canonical encoding is interned
// once to a small id, so a state key names each older set's part by one number instead of
// spelling out the whole stack below it (a deep nesting made every key, and so every new DFA
// state, cost O(depth)). Shared by every matcher keyed into one MaskCache; ids stay valid until
// clear(), which must coincide with clearing every key made with them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace deepinfer::grammar {

class ContinuationIds {
 public:
  // Equal encodings get equal ids; ids are < 2^31.
  uint32_t intern(const std::vector<uint32_t>& encoding);
  size_t size() const { return ids_.size(); }
  size_t words() const { return words_; }
  // Bumped by clear(): a matcher's memo of ids from an older generation is stale.
  uint64_t generation() const { return generation_; }
  void clear();

 private:
  struct Hash {
    size_t operator()(const std::vector<uint32_t>& k) const;
  };
  std::unordered_map<std::vector<uint32_t>, uint32_t, Hash> ids_;
  size_t words_ = 0;
  uint64_t generation_ = 1;
};

}  // namespace deepinfer::grammar

// A byte DFA over Earley states, built lazily while token masks are walked. A state is an
// Earley set named by EarleyMatcher::local_key; a transition is computed once by a real Earley
// step and then reused, so the trie walk costs a table lookup per node instead of an Earley
// step. Inside a string the same few states recur for every token of the vocabulary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace deepinfer::grammar {

class ByteDfa {
 public:
  static constexpr int32_t kUnknown = -2, kDead = -1;

  // The state named by key (created when new).
  int32_t intern(const std::vector<uint32_t>& key);
  int32_t next(int32_t state, uint8_t b) const { return trans_[state * 256 + b]; }
  void set_next(int32_t state, uint8_t b, int32_t to) { trans_[state * 256 + b] = to; }
  // Row-major [state][byte]; valid until the next intern().
  const int32_t* table() const { return trans_.data(); }
  size_t num_states() const { return trans_.size() / 256; }
  // Keys name absolute set indices, so any rollback below them invalidates everything.
  void clear();

 private:
  struct KeyHash {
    size_t operator()(const std::vector<uint32_t>& k) const;
  };
  std::unordered_map<std::vector<uint32_t>, int32_t, KeyHash> ids_;
  std::vector<int32_t> trans_;
};

}  // namespace deepinfer::grammar

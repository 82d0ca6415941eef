// A byte DFA over Earley states, built lazily while token masks are walked. A state is a
// matcher state named by EarleyMatcher::state_key (canonical: the same name whatever path led
// there), so a transition is computed once by a real Earley step and then reused by every walk
// and every matcher sharing the DFA; the trie walk costs a table lookup per node. Inside a
// string, or in a run of whitespace, the same few states recur for every token.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "deepinfer/grammar/grammar.h"

namespace deepinfer::grammar {

class ByteDfa {
 public:
  static constexpr int32_t kUnknown = -2, kDead = -1;

  // The state named by key. A new state gets kDead for every byte outside `allowed` (what the
  // matcher in that state accepts), so only viable bytes ever need a real Earley step.
  int32_t intern(const std::vector<uint32_t>& key, const ByteSet& allowed);
  int32_t next(int32_t state, uint8_t b) const { return trans_[state * 256 + b]; }
  void set_next(int32_t state, uint8_t b, int32_t to) { trans_[state * 256 + b] = to; }
  // Row-major [state][byte]; valid until the next intern().
  const int32_t* table() const { return trans_.data(); }
  size_t num_states() const { return trans_.size() / 256; }
  // Invalidates every state id: only between walks.
  void clear();

  // The mask fast path's analysis of a state (text_run.cc): the ASCII bytes that do not lead
  // to its most common live target (bit b of excluded), whether every well-formed multi-byte
  // character leads there too (when unicode_checked; the chain checks it only near its root),
  // and that target (kDead: no live ASCII byte). A function of the DFA's transitions, so kept
  // once computed: a counting string's masks follow a chain of states the previous mask
  // already analysed.
  struct RunInfo {
    std::array<uint64_t, 2> excluded{};
    bool unicode = false;
    bool unicode_checked = false;
    int32_t target = kDead;
  };
  const RunInfo* run_info(int32_t state) const {
    return run_known_[state] ? &run_info_[state] : nullptr;
  }
  void set_run_info(int32_t state, const RunInfo& info) {
    run_info_[state] = info;
    run_known_[state] = 1;
  }

 private:
  struct KeyHash {
    size_t operator()(const std::vector<uint32_t>& k) const;
  };
  std::unordered_map<std::vector<uint32_t>, int32_t, KeyHash> ids_;
  std::vector<int32_t> trans_;
  std::vector<RunInfo> run_info_;
  std::vector<uint8_t> run_known_;
};

}  // namespace deepinfer::grammar

// Byte classes of a grammar: bytes that belong to exactly the same byte sets. The Earley
// matcher sees a byte only through set membership, so two bytes of one class lead from any
// state to the same next state; the lazy DFA computes one transition per class, not per byte.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "deepinfer/grammar/grammar.h"

namespace deepinfer::grammar {

class ByteClasses {
 public:
  explicit ByteClasses(const std::vector<ByteSet>& sets);
  uint8_t of(uint8_t b) const { return class_of_[b]; }
  int count() const { return static_cast<int>(members_.size()); }
  const std::vector<uint8_t>& members(uint8_t c) const { return members_[c]; }

 private:
  std::array<uint8_t, 256> class_of_{};
  std::vector<std::vector<uint8_t>> members_;
};

}  // namespace deepinfer::grammar

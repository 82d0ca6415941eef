// Byte-level Earley recognizer over a Grammar, with rollback.
//
// Why Earley: it accepts every context-free grammar the front ends produce (left recursion,
// ambiguity, empty rules) without grammar transformations, so correctness does not hinge on
// the front end emitting an LL-friendly shape. Nullable rules use the Aycock-Horspool fix
// (prediction of a nullable rule also advances past it). Each accepted byte pushes one Earley
// set onto a stack, so rollback is truncation.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "deepinfer/grammar/grammar.h"

namespace deepinfer::grammar {

// Grammar flattened for the recognizer: every (rule, alternative, dot) is one position id.
class CompiledGrammar {
 public:
  explicit CompiledGrammar(Grammar g);
  const Grammar& grammar() const { return grammar_; }

 private:
  friend class EarleyMatcher;
  static constexpr uint32_t kEnd = 0xFFFFFFFF;
  struct Position {
    uint32_t rule;          // lhs
    Element::Kind kind;     // kind of the element after the dot (if not end)
    uint32_t index = kEnd;  // byte set / rule after the dot, or kEnd when complete
  };
  Grammar grammar_;
  std::vector<Position> positions_;
  std::vector<std::vector<uint32_t>> rule_starts_;  // rule -> first position of each alt
  std::vector<bool> nullable_;
  uint32_t start_rule_ = 0;  // synthetic S ::= root
  uint32_t accept_position_ = 0;
};

class EarleyMatcher {
 public:
  explicit EarleyMatcher(std::shared_ptr<const CompiledGrammar> g);

  // False (and no state change) when the byte cannot extend a valid prefix.
  bool accept_byte(uint8_t b);
  // All or nothing.
  bool accept_bytes(std::string_view bytes);
  // The accepted bytes form a complete sentence.
  bool can_terminate() const;
  // Complete, and no byte can extend it.
  bool is_terminated() const { return can_terminate() && !allowed_bytes().any(); }
  // Bytes that accept_byte would take now.
  ByteSet allowed_bytes() const;
  size_t num_bytes() const { return set_begin_.size() - 1; }
  void rollback_bytes(size_t n);
  void reset();

 private:
  struct Item {
    uint32_t position;
    uint32_t origin;
  };
  void add(uint32_t position, uint32_t origin);
  void close_current_set();

  std::shared_ptr<const CompiledGrammar> g_;
  std::vector<Item> items_;
  std::vector<uint32_t> set_begin_;  // set k = items_[set_begin_[k], set_begin_[k+1] or end)
};

}  // namespace deepinfer::grammar

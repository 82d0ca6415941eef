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
#include <unordered_map>
#include <vector>

#include "deepinfer/grammar/byte_classes.h"
#include "deepinfer/grammar/continuation_ids.h"
#include "deepinfer/grammar/grammar.h"

namespace deepinfer::grammar {

// Grammar flattened for the recognizer: every (rule, alternative, dot) is one position id.
class CompiledGrammar {
 public:
  // Tokens are at most this many bytes (TokenizerInfo enforces it); compact state keys only
  // tell states apart as far as strings this long can (lookahead_canon.cc).
  static constexpr uint32_t kMaxLookahead = 255;
  // max_lookahead: the longest token (bytes) the grammar will be matched with. A tokenizer's own
  // longest token (TokenizerInfo::max_token_bytes, 128 for DeepSeek's) lets more positions of a
  // counted string share a key; GrammarMatcher refuses a tokenizer with longer tokens.
  explicit CompiledGrammar(Grammar g, uint32_t max_lookahead = kMaxLookahead);
  const Grammar& grammar() const { return grammar_; }
  const ByteClasses& byte_classes() const { return classes_; }
  uint32_t max_lookahead() const { return max_lookahead_; }

 private:
  friend class EarleyMatcher;
  static constexpr uint32_t kEnd = 0xFFFFFFFF;
  struct Position {
    uint32_t rule;          // lhs
    Element::Kind kind;     // kind of the element after the dot (if not end)
    uint32_t index = kEnd;  // byte set / rule after the dot, or kEnd when complete
  };
  Grammar grammar_;
  ByteClasses classes_;
  std::vector<Position> positions_;
  std::vector<std::vector<uint32_t>> rule_starts_;  // rule -> first position of each alt
  std::vector<bool> nullable_;
  // Position -> a representative whose remaining suffix no string of kMaxLookahead + 1 bytes
  // tells apart: deep inside a long run of one element (x{3000}) or a long chain of nested
  // optionals (x{0,10000}) every position looks the same that far ahead.
  void compute_canonical_positions();
  std::vector<uint32_t> canon_;
  // Char rules (char_rules.cc): rules that read exactly one character, any multi-byte one
  // included. char_start_[position]: the position starts an alternative of one;
  // char_single_[rule]: the ASCII bytes only its one-byte alternatives read.
  void find_char_rules();
  std::vector<uint8_t> char_start_;
  std::vector<ByteSet> char_single_;
  std::vector<uint8_t> set_reads_high_;  // per byte set: it holds a byte >= 0x80
  uint32_t max_lookahead_;
  uint32_t start_rule_ = 0;  // synthetic S ::= root
  uint32_t accept_position_ = 0;
};

class EarleyMatcher {
 public:
  // leo: Leo's deterministic-reduction shortcut (off only to test it against plain Earley).
  // work_limit: the budget (see start_work) of building the initial set; 0 = unlimited.
  explicit EarleyMatcher(std::shared_ptr<const CompiledGrammar> g, bool leo = true,
                         uint64_t work_limit = 0);

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
  // Proven from the current set's items (char_rules.cc): every well-formed multi-byte
  // character leads to the state the ASCII byte b leads to. False: not proven (probe them).
  bool multibyte_chars_follow(uint8_t b) const;
  // The byte sets (indices into the grammar's byte_sets) the current set's items scan, each
  // once. The next set after byte b depends only on which of them hold b.
  void scanned_sets(std::vector<uint32_t>* out) const;
  size_t num_bytes() const { return set_begin_.size() - 1; }
  void rollback_bytes(size_t n);
  void reset();
  // Appends an encoding of everything the future of this matcher depends on: the current set's
  // unfinished items and, for each older set a live item can complete a rule r back into, that
  // set's items waiting on r (transitively), with sets renumbered in visit order. Equal keys =>
  // equal behaviour on every byte string, so masks and DFA states may be keyed by it.
  void state_key(std::vector<uint32_t>* out) const;
  // The future as far as a token can see, named compactly (earley_compact_key.cc): the current
  // set's unfinished items not predicted in it (those follow from the others), each with the
  // id (in `ids`) of the continuation its origin set holds for its rule; positions are
  // canonical (CompiledGrammar::canon_). Ids are memoized per (set, rule), so a key costs
  // O(current set) however deep the stack. Equal keys (same `ids`) => equal behaviour on every
  // byte string of at most kMaxLookahead bytes (also which of them complete the sentence), so
  // masks and a DFA walked no deeper than one token may be keyed by it. Out of work: the key
  // is incomplete, as state_key's.
  void compact_state_key(std::vector<uint32_t>* out, ContinuationIds* ids) const;

  // Work budget (issue 14): item operations (items added or looked at, dedup probes, key
  // entries) from now on; 0 = unlimited. Deterministic, unlike a clock. Once it is spent,
  // out_of_work() is true, the byte being accepted is refused with nothing changed, every later
  // accept_byte is refused and state_key() stops early (an incomplete key), until the next
  // start_work. A matcher whose initial set ran out at construction stays out of work.
  void start_work(uint64_t limit);
  bool out_of_work() const { return out_of_work_; }
  uint64_t work() const { return work_; }

 private:
  struct Item {
    uint32_t position;
    uint32_t origin;
  };
  void add(uint32_t position, uint32_t origin);
  // False when the work budget ran out part-way (the set is then incomplete).
  bool close_current_set();
  bool spend(uint64_t n) const {
    work_ += n;
    if (work_limit_ != 0 && work_ > work_limit_) out_of_work_ = true;
    return !out_of_work_;
  }
  // Leo: when closed set j has exactly one item waiting on `rule` and the rule is its last
  // element, completing `rule` from j completes that item too, and so on up the chain. The
  // topmost item of the chain is memoized per (set, rule), so right recursion (bounded
  // repetition is right-nested) costs O(1) per byte instead of O(depth).
  bool leo_top(uint32_t j, uint32_t rule, Item* top) const;

  void begin_set();
  // Interns the continuation (set j < current, rule r) and every one it refers to; false when
  // out of work.
  bool continuation_id(uint32_t j, uint32_t r, ContinuationIds* ids, uint32_t* id) const;
  bool memo_get(uint32_t j, uint32_t r, uint32_t* id) const;
  void memo_put(uint32_t j, uint32_t r, uint32_t id) const;

  std::shared_ptr<const CompiledGrammar> g_;
  std::vector<Item> items_;
  std::vector<uint32_t> set_begin_;  // set k = items_[set_begin_[k], set_begin_[k+1] or end)
  // Dedup index for the set being built: items with the same position are chained (newest
  // first) from head_[position], valid while stamp_[position] == epoch_.
  std::vector<uint32_t> next_same_;  // parallel to items_
  std::vector<uint32_t> head_;
  std::vector<uint32_t> stamp_;
  uint32_t epoch_ = 0;
  std::vector<uint32_t> set_id_;  // epoch at each set's creation: names it in leo_memo_
  bool leo_;
  // (set id << 32 | rule) -> topmost item, or kNoLeo. Entries of rolled-back sets are never
  // looked up again (set ids are not reused); the memo is cleared when it grows large.
  mutable std::unordered_map<uint64_t, uint64_t> leo_memo_;
  mutable std::vector<int32_t> key_canon_;   // scratch for state_key: set -> visit order
  mutable std::vector<uint32_t> key_stamp_;  // scratch for state_key: key_canon_ validity
  mutable uint32_t key_gen_ = 0;
  mutable std::vector<std::pair<uint32_t, uint32_t>> key_pairs_;  // scratch: (set, rule)
  mutable std::vector<uint32_t> key_pair_next_, key_pair_head_, key_pair_stamp_;
  // compact_state_key's memo: (set id << 32 | rule) -> continuation id of generation
  // cont_generation_; sets whose id an epoch wrap reset (0) use cont_tmp_ for one call.
  mutable std::unordered_map<uint64_t, uint32_t> cont_memo_, cont_tmp_;
  mutable uint64_t cont_generation_ = 0;
  mutable std::vector<std::pair<uint32_t, uint32_t>> cont_stack_;  // scratch: (set, rule)
  mutable std::vector<uint32_t> cont_local_, cont_buf_;            // scratch
  mutable uint64_t work_ = 0;
  uint64_t work_limit_ = 0;
  mutable bool out_of_work_ = false;
  bool initial_set_incomplete_ = false;
};

}  // namespace deepinfer::grammar

// Grammar IR: a context-free grammar over bytes. Every front end (EBNF, regex, later JSON
// Schema) lowers into this; matchers only ever see bytes, so tokens that end mid-UTF-8 need no
// special case.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::grammar {

using ByteSet = std::bitset<256>;

struct Element {
  enum class Kind : uint8_t { kBytes, kRule };
  Kind kind;
  uint32_t index;  // into Grammar::byte_sets (kBytes) or Grammar::rules (kRule)
  bool operator==(const Element&) const = default;
};

using Sequence = std::vector<Element>;

struct Rule {
  std::string name;
  std::vector<Sequence> alternatives;  // an empty Sequence is epsilon
};

struct Grammar {
  std::vector<ByteSet> byte_sets;
  std::vector<Rule> rules;
  uint32_t root = 0;

  // Readable dump (GBNF-like) for debugging and error messages.
  std::string to_string() const;
};

// Compile-time size limits (issue 14). The unit is the element: one byte set or rule reference
// in an alternative. Every grammar in the tests and the corpus is far within both (largest:
// 10116 IR elements, 246 expanded); see README.md.
//
// Every front end: elements over all rules of the IR. This bounds the compiled grammar's memory,
// each matcher's per-position arrays and the number of Earley positions (many JSON Schema length
// bounds or a long pattern of counted repetitions add up).
inline constexpr uint64_t kMaxGrammarElements = uint64_t{1} << 20;
// Regex (so_args.regex, JSON Schema pattern/format) and EBNF: elements with every counted
// repetition written out and every rule reference inlined, as RE2 and Rust's regex size their
// programs. Nested counted repetitions multiply here while the IR shares their body, and an
// Earley set of such a grammar holds one item per unrolled position it can be at: the nest
// (a{0,999}){0,999} is about 2M elements and made each mask take seconds.
inline constexpr uint64_t kMaxExpandedElements = 100000;

// Elements over all rules.
uint64_t num_elements(const Grammar& g);
// Elements of the root with every rule reference inlined, except a reference back into a rule
// being expanded (recursion), which counts 1. Stops early: any result above `cap` is cap + 1.
uint64_t expanded_size(const Grammar& g, uint64_t cap);
// invalid_argument when g breaks kMaxGrammarElements or (expanded) kMaxExpandedElements,
// naming the limit: "<what> expands to more than N grammar elements (limit N) ...".
Status check_grammar_size(const Grammar& g, bool expanded, std::string_view what);
// The error check_grammar_size returns (for a builder that is too_large()).
Status grammar_size_error(std::string_view what, bool expanded);

// Builds a Grammar. Repetition is lowered to left-recursive helper rules (R ::= "" | R X),
// which Earley handles in linear time, unlike right recursion.
class GrammarBuilder {
 public:
  // A fragment is a set of alternatives not yet bound to a rule.
  using Fragment = std::vector<Sequence>;

  uint32_t add_rule(std::string name);  // empty rule, alternatives filled later
  Rule& rule(uint32_t id) { return grammar_.rules[id]; }
  uint32_t num_rules() const { return static_cast<uint32_t>(grammar_.rules.size()); }

  Element bytes(const ByteSet& set);
  Fragment literal(std::string_view bytes);
  // The alternatives of several literals (duplicates dropped), left-factored into a trie: an
  // Earley set then holds an item per distinct next byte, not one per literal still matching
  // (a 150-value enum's first byte was 150 items, each scanned at every step).
  Fragment literals(std::vector<std::string> texts, std::string_view hint);
  // Every UTF-8 encoding of a code point in the ranges (inclusive; surrogates excluded).
  Fragment code_point_ranges(const std::vector<std::pair<uint32_t, uint32_t>>& ranges);

  // One element standing for the fragment (an anonymous rule unless it is a single element).
  Element as_element(const Fragment& f, std::string_view hint);
  Fragment concat(const Fragment& a, const Fragment& b, std::string_view hint);
  Fragment star(const Fragment& f, std::string_view hint);
  Fragment plus(const Fragment& f, std::string_view hint);
  Fragment optional(const Fragment& f, std::string_view hint);
  // max < 0 means unbounded. Callers bound min/max to keep the grammar small.
  Fragment repeat(const Fragment& f, int min, int max, std::string_view hint);

  Grammar finish(uint32_t root) &&;

  // True once repeat() was asked for more than kMaxGrammarElements in all: it then builds
  // nothing more (an epsilon stands in), so memory stays bounded; the front end must fail.
  bool too_large() const { return too_large_; }
  // Accounts for n elements a caller writes through rule() directly (an embedded grammar).
  void count_elements(uint64_t n);

 private:
  std::string fresh_name(std::string_view hint);

  Grammar grammar_;
  std::map<std::array<uint64_t, 4>, uint32_t> byte_set_ids_;
  int anon_counter_ = 0;
  uint64_t elements_ = 0;  // elements created through as_element/star/plus/repeat
  bool too_large_ = false;
};

// Code points covered by a class, complemented when negate (over U+0000..U+10FFFF minus
// surrogates). Ranges are normalized: sorted, merged.
std::vector<std::pair<uint32_t, uint32_t>> normalize_ranges(
    std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negate);

// Appends the UTF-8 encoding of cp.
void append_utf8(uint32_t cp, std::string* out);

}  // namespace deepinfer::grammar

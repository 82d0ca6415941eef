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

 private:
  std::string fresh_name(std::string_view hint);

  Grammar grammar_;
  std::map<std::array<uint64_t, 4>, uint32_t> byte_set_ids_;
  int anon_counter_ = 0;
};

// Code points covered by a class, complemented when negate (over U+0000..U+10FFFF minus
// surrogates). Ranges are normalized: sorted, merged.
std::vector<std::pair<uint32_t, uint32_t>> normalize_ranges(
    std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negate);

// Appends the UTF-8 encoding of cp.
void append_utf8(uint32_t cp, std::string* out);

}  // namespace deepinfer::grammar

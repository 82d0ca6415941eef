// Generic JSON pieces (whitespace gaps, strings, numbers, any value, bounded repetition) on top
// of GrammarBuilder, shared by the JSON Schema compiler and json_object.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/grammar/grammar.h"

namespace deepinfer::grammar::json_detail {

class JsonBuilder {
 public:
  using Fragment = GrammarBuilder::Fragment;

  // Each whitespace gap: empty when max_whitespace is 0; else, flexible, up to max_whitespace
  // bytes of [ \t\n\r]; else nothing, one space, or one newline and an indent of up to
  // max_whitespace spaces or tabs (JsonSchemaOptions::whitespace).
  JsonBuilder(int max_whitespace, bool flexible_whitespace);

  GrammarBuilder& b() { return b_; }
  Element ws() const { return ws_; }
  Element lit(std::string_view s, std::string_view hint);
  Element rule_of(Fragment alts, std::string_view hint) { return b_.as_element(alts, hint); }

  // x{min,max} (max nullopt = unbounded) in O(log max) rules, unambiguously.
  Element repeat(Element x, int64_t min, std::optional<int64_t> max, std::string_view hint);

  // One JSON string character (raw code point or any escape; a surrogate pair is one).
  Element string_char();
  // A whole JSON string with min..max characters (code points).
  Element string(int64_t min_len, std::optional<int64_t> max_len);
  // A string whose value is not one of `names` and that uses no escapes (extra object keys).
  Element string_not_in(const std::vector<std::string>& names);
  Element number();   // any JSON number
  Element integer();  // -?(0|[1-9][0-9]*)
  Element any_value();
  Element any_object();
  Element any_array();
  // open "ws" (item ("ws,ws" item)*)? "ws" close, for items/members of any kind.
  Element delimited(char open, Element item, char close, std::string_view hint);
  // Regex (our dialect) as raw bytes, or as the content of a JSON string when json_string.
  StatusOr<Element> regex(std::string_view pattern, bool json_string, std::string_view hint);
  // A byte grammar (a regex's, a language product's) embedded the same way.
  Element embed(const Grammar& g, bool json_string, std::string_view hint);

  Grammar finish(Element root) &&;

 private:
  Element exactly(Element x, int64_t n, std::string_view hint);
  Element up_to(Element x, int64_t n, std::string_view hint);
  static constexpr int64_t kLinearUpTo = 10000;  // larger bounds: O(log n) rules

  GrammarBuilder b_;
  Element ws_;
  std::optional<Element> string_char_, string_, number_, integer_, any_value_, any_object_,
      any_array_, raw_char_;
};

}  // namespace deepinfer::grammar::json_detail

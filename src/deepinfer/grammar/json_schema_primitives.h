// Pieces of the JSON Schema front end that do not depend on schema structure: number ranges
// and string formats as regexes (our regex dialect), and embedding a regex grammar as the
// content of a JSON string.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/grammar/grammar.h"

namespace deepinfer::grammar::json_detail {

// Decimal integers (no leading zeros, no "-0") in [lo, hi]; nullopt = unbounded. Empty string
// when the range is empty.
std::string integer_range_regex(std::optional<int64_t> lo, std::optional<int64_t> hi);

// JSON numbers (no exponent) whose value lies between integral bounds; *_exclusive makes a bound
// strict. Empty string when no number qualifies.
std::string number_range_regex(std::optional<int64_t> lo, bool lo_exclusive,
                               std::optional<int64_t> hi, bool hi_exclusive);

// The string *value* language of a format (before JSON escaping), or nullopt if unknown.
std::optional<std::string> format_regex(std::string_view format);

// Copies the rules of g into b and returns an element for its root. With json_string, every
// byte is rewritten to what may stand for it inside a JSON string literal: '"', '\\' and control
// bytes become escapes (short ones and \u00XX), '/' may also be "\/"; other bytes stay raw.
Element embed_grammar(const Grammar& g, GrammarBuilder* b, bool json_string, std::string_view hint);

}  // namespace deepinfer::grammar::json_detail

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
// hostname, regex and uri-reference are sound subsets (README.md).
std::optional<std::string> format_regex(std::string_view format);
// The regex with every unbounded repetition capped at k: `*` -> `{0,k}`, `+` -> `{1,k}`,
// `{m,}` -> `{m,max(m,k)}` (outside classes and escapes): a subset of its language. k >= 1.
std::string cap_repetitions(const std::string& pattern, int64_t k);
// A format some draft (3 to 2020-12) defines; other names are custom formats (annotations).
bool is_standard_format(std::string_view format);

// The fewest and most code points of a string in the language of g (a grammar over UTF-8
// bytes): a byte set counts one code point when it holds a byte that starts one. The most is
// nullopt (unbounded) as soon as a rule is recursive, so it is never below the truth.
std::pair<int64_t, std::optional<int64_t>> code_point_length_range(const Grammar& g);

// Copies the rules of g into b and returns an element for its root. With json_string, every
// byte is rewritten to what may stand for it inside a JSON string literal: '"', '\\' and control
// bytes become escapes (short ones and \u00XX), '/' may also be "\/"; other bytes stay raw.
Element embed_grammar(const Grammar& g, GrammarBuilder* b, bool json_string, std::string_view hint);

}  // namespace deepinfer::grammar::json_detail

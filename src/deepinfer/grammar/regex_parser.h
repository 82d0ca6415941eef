// Regex front end (ECMAScript / PCRE subset), compiled into the byte grammar IR.
#pragma once

#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/grammar/grammar.h"

namespace deepinfer::grammar {

// The whole output must match the pattern (full match). Supported: literals (UTF-8), `.` (any
// code point but \n), [classes] with ranges, negation and escapes, \d \w \s \D \W \S, escapes
// \n \r \t \f \v \0 \xHH \uHHHH \u{H..}, groups ( ) (?: ) (?<name> ) (?P<name> ), alternation,
// quantifiers * + ? {m} {m,} {m,n} with lazy `?` suffixes (same language), ^ at the start and
// $ at the end. Anything else (backreferences, lookaround, \b, \p{..}, possessive quantifiers,
// inline flags) is an error naming the construct and its offset.
StatusOr<Grammar> parse_regex(std::string_view pattern);

}  // namespace deepinfer::grammar

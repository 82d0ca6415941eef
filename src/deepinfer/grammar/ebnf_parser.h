// EBNF front end for the GBNF / xgrammar dialect.
#pragma once

#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/grammar/grammar.h"

namespace deepinfer::grammar {

// Rules `name ::= alternatives`; a rule runs until the next `name ::=`. Elements: "literals"
// (escapes \n \r \t \\ \" \' \[ \] \xHH \uHHHH \UHHHHHHHH), [classes] over code points with
// ranges and ^ negation, rule names, ( groups ), postfix * + ? {m} {m,} {m,n}, alternation |,
// and # comments. Errors name line:column. The start rule is `root_rule`.
StatusOr<Grammar> parse_ebnf(std::string_view text, std::string_view root_rule = "root");

}  // namespace deepinfer::grammar

// Intersection of regular byte languages, some of them complemented, as one grammar. Where the
// JSON Schema front end needs a string language that no single regex of ours gives (`pattern`
// with `format`, a length bound a pattern does not meet, `not: {pattern}`, a leading
// lookahead), it explores the product automaton: a state is the tuple of the terms' Earley
// state keys (equal keys: equal futures), a transition one byte class, and the result is a
// right-linear grammar with one rule per state that can still reach an accepting one. Exact,
// but only for terms whose Earley state keys are finite (regex grammars); the state cap turns
// anything else into an error rather than a hang.
#pragma once

#include <cstddef>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/grammar/grammar.h"

namespace deepinfer::grammar {

struct LanguageTerm {
  Grammar grammar;       // a language L over bytes
  bool negated = false;  // the strings must NOT be in the term's language
  // The term's language is L followed by any bytes: once a prefix is in L the term is settled
  // (held apart: Earley would keep one item per such prefix and never repeat a state).
  bool then_anything = false;
};

// The strings in the language of every term that is not negated and of no negated term. At least
// one term must not be negated. `unimplemented` past max_states product states; `invalid_argument`
// with "accepts no value" when the language is empty.
StatusOr<Grammar> intersect_languages(const std::vector<LanguageTerm>& terms, size_t max_states);

}  // namespace deepinfer::grammar

// The regex class shorthands \d \w \s and their negations, read so that what the grammar writes
// matches under every dialect a JSON Schema `pattern` meets: ECMA-262 (the spec's; \d and \w
// ASCII, \s with Unicode whitespace) and Python's re (its validators'; all three Unicode).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace deepinfer::grammar {

using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;

// Appends the set of shorthand `c` (d w s D W S) to `r`; *negated: the shorthand is a
// complement (D W S), so `r` holds the set it complements. complemented: whether the base set
// (of d, w or s) ends up complemented, by the shorthand's case or a negated class around it
// ([^\s]). Then the widest reading is taken (every dialect's members, so the complement holds
// only what all of them exclude); otherwise the narrowest (ASCII, which every dialect reads
// as a member).
void add_class_shorthand(char c, bool complemented, CodePointRanges* r, bool* negated);

}  // namespace deepinfer::grammar

#include "deepinfer/grammar/regex_parser.h"

#include <optional>
#include <string>
#include <vector>

#include "deepinfer/grammar/regex_shorthands.h"
#include "deepinfer/grammar/utf8_decode.h"

namespace deepinfer::grammar {
namespace {

using Fragment = GrammarBuilder::Fragment;
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

constexpr int kMaxRepeat = 1000;
constexpr int kMaxDepth = 200;

class RegexParser {
 public:
  explicit RegexParser(std::string_view p) : p_(p) {}

  StatusOr<Grammar> parse() {
    uint32_t root = builder_.add_rule("root");
    ASSIGN_OR_RETURN(Fragment f, parse_alternation(0, /*at_start=*/true));
    if (!at_end()) {
      if (peek() == ')') return error("unbalanced ')'");
      return error("unexpected '" + char_for_message(p_, pos_) + "'");
    }
    builder_.rule(root).alternatives = std::move(f);
    if (builder_.too_large()) return grammar_size_error("regex", false);
    Grammar g = std::move(builder_).finish(root);
    RETURN_IF_ERROR(check_grammar_size(g, /*expanded=*/true, "regex"));
    return g;
  }

 private:
  bool at_end() const { return pos_ >= p_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0'; }
  Status error_at(size_t offset, const std::string& m) const {
    return invalid_argument("regex offset " + std::to_string(offset) + ": " + m);
  }
  Status error(const std::string& m) const { return error_at(pos_, m); }
  Status unsupported(size_t offset, const std::string& what) const {
    return unimplemented("regex offset " + std::to_string(offset) + ": " + what +
                         " is not supported");
  }

  // at_start: nothing can have been matched before this point on any path (a '^' here holds).
  StatusOr<Fragment> parse_alternation(int depth, bool at_start) {
    if (depth > kMaxDepth) return error("nesting too deep");
    Fragment result;
    while (true) {
      ASSIGN_OR_RETURN(Fragment seq, parse_sequence(depth, at_start));
      for (auto& s : seq) result.push_back(std::move(s));
      if (peek() != '|') break;
      ++pos_;
    }
    return result;
  }

  // Anchors are kept only where full-match semantics makes them no-ops: '^' where nothing can
  // have been matched yet, '$' where nothing more can be (at the end of an alternative, of
  // groups that end the pattern); a group holding one may be quantified only by '?'.
  StatusOr<Fragment> parse_sequence(int depth, bool at_start) {
    Fragment seq = {Sequence{}};
    bool start = at_start;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        ++pos_;
        anchor_in_atom_ = dollar_in_atom_ = true;
        if (!at_end() && peek() != '|' && peek() != ')')
          return unsupported(pos_ - 1, "'$' before the end of the pattern");
        continue;
      }
      if (peek() == '^') {
        if (!start) return unsupported(pos_, "'^' after the start of the pattern");
        ++pos_;
        anchor_in_atom_ = true;
        continue;
      }
      const bool outer_anchor = anchor_in_atom_, outer_dollar = dollar_in_atom_;
      anchor_in_atom_ = dollar_in_atom_ = false;
      const size_t atom_at = pos_;
      ASSIGN_OR_RETURN(Fragment atom, parse_quantified(depth, start));
      if (dollar_in_atom_ && !at_end() && peek() != '|' && peek() != ')')
        return unsupported(atom_at, "'$' before the end of the pattern");
      anchor_in_atom_ = anchor_in_atom_ || outer_anchor;
      dollar_in_atom_ = dollar_in_atom_ || outer_dollar;
      start = false;
      seq = builder_.concat(seq, atom, "seq");
    }
    return seq;
  }

  std::optional<int> parse_int() {
    size_t start = pos_;
    long v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = std::min<long>(v * 10 + (peek() - '0'), 1000000);
      ++pos_;
    }
    if (pos_ == start) return std::nullopt;
    return static_cast<int>(v);
  }

  // {m}, {m,}, {m,n}; nullopt (position restored) when '{' does not start a quantifier, which
  // PCRE then reads as a literal brace.
  StatusOr<std::optional<std::pair<int, int>>> try_bounds() {
    size_t start = pos_;
    ++pos_;
    auto lo = parse_int();
    int hi = lo ? *lo : 0;
    if (lo && peek() == ',') {
      ++pos_;
      auto h = parse_int();
      hi = h ? *h : -1;
    }
    if (!lo || peek() != '}') {
      pos_ = start;
      return std::optional<std::pair<int, int>>();
    }
    ++pos_;
    if (hi >= 0 && hi < *lo) return error_at(start, "quantifier {m,n} has n < m");
    if (*lo > kMaxRepeat || hi > kMaxRepeat) {
      return error_at(start, "quantifier bound over " + std::to_string(kMaxRepeat));
    }
    return std::optional<std::pair<int, int>>(std::make_pair(*lo, hi));
  }

  StatusOr<Fragment> parse_quantified(int depth, bool at_start) {
    ASSIGN_OR_RETURN(Fragment f, parse_atom(depth, at_start));
    while (!at_end()) {
      char c = peek();
      size_t qpos = pos_;
      if (anchor_in_atom_ && (c == '*' || c == '+' || c == '{'))
        return unsupported(qpos, "a repeated group holding an anchor");
      if (c == '*') {
        ++pos_;
        f = builder_.star(f, "star");
      } else if (c == '+') {
        ++pos_;
        f = builder_.plus(f, "plus");
      } else if (c == '?') {
        ++pos_;
        f = builder_.optional(f, "opt");
      } else if (c == '{') {
        ASSIGN_OR_RETURN(auto bounds, try_bounds());
        if (!bounds) break;
        f = builder_.repeat(f, bounds->first, bounds->second, "rep");
      } else {
        break;
      }
      // Lazy quantifiers match the same language; possessive ones do not.
      if (peek() == '?') {
        ++pos_;
      } else if (peek() == '+') {
        return unsupported(qpos, "possessive quantifier");
      }
      if (peek() == '*' || peek() == '+' || peek() == '?') {
        return error("quantifier '" + std::string(1, peek()) + "' follows another quantifier");
      }
    }
    return f;
  }

  StatusOr<uint32_t> parse_hex_digits(int min_digits, int max_digits, char terminator) {
    uint32_t v = 0;
    int n = 0;
    while (n < max_digits) {
      char c = peek();
      int d = (c >= '0' && c <= '9')   ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : -1;
      if (d < 0) break;
      v = v * 16 + d;
      ++pos_;
      ++n;
      if (v > 0x10FFFF) return error("escape is beyond U+10FFFF");
    }
    if (n < min_digits) return error("expected hex digits in escape");
    if (terminator) {
      if (peek() != terminator) return error("expected '}' to close \\u{...}");
      ++pos_;
    }
    if (v >= 0xD800 && v <= 0xDFFF) return error("escape names a surrogate");
    return v;
  }

  StatusOr<uint32_t> next_code_point() {
    std::optional<uint32_t> cp = decode_utf8(p_, &pos_);
    if (!cp) return error("invalid UTF-8 in pattern");
    return *cp;
  }

  // After '\': a single code point escape, or a class shorthand added to `cls`.
  // Returns nullopt for shorthands. in_negated_class: the escape stands in a [^...] class.
  StatusOr<std::optional<uint32_t>> parse_escape(Ranges* cls, bool* negated, bool in_class,
                                                 bool in_negated_class = false) {
    size_t start = pos_ - 1;
    if (at_end()) return error_at(start, "pattern ends with '\\'");
    char c = peek();
    ++pos_;
    switch (c) {
      case 'd':
      case 'D':
      case 'w':
      case 'W':
      case 's':
      case 'S':
        // The base set ends complemented by an upper-case shorthand or a negated class.
        add_class_shorthand(c, (c >= 'A' && c <= 'Z') != in_negated_class, cls, negated);
        return std::optional<uint32_t>();
      case 'n':
        return std::optional<uint32_t>('\n');
      case 'r':
        return std::optional<uint32_t>('\r');
      case 't':
        return std::optional<uint32_t>('\t');
      case 'f':
        return std::optional<uint32_t>('\f');
      case 'v':
        return std::optional<uint32_t>('\v');
      case '0':
        return std::optional<uint32_t>(0);
      case 'x': {
        if (peek() == '{') {
          ++pos_;
          ASSIGN_OR_RETURN(uint32_t v, parse_hex_digits(1, 6, '}'));
          return std::optional<uint32_t>(v);
        }
        ASSIGN_OR_RETURN(uint32_t v, parse_hex_digits(2, 2, 0));
        return std::optional<uint32_t>(v);
      }
      case 'u': {
        if (peek() == '{') {
          ++pos_;
          ASSIGN_OR_RETURN(uint32_t v, parse_hex_digits(1, 6, '}'));
          return std::optional<uint32_t>(v);
        }
        ASSIGN_OR_RETURN(uint32_t v, parse_hex_digits(4, 4, 0));
        return std::optional<uint32_t>(v);
      }
      case 'b':
        if (in_class) return std::optional<uint32_t>('\b');
        return unsupported(start, "word boundary '\\b'");
      case 'B':
        return unsupported(start, "'\\B'");
      case 'p':
      case 'P':
        return unsupported(start, "Unicode property '\\" + std::string(1, c) + "'");
      case 'A':
      case 'z':
      case 'Z':
      case 'G':
        return unsupported(start, "anchor '\\" + std::string(1, c) + "'");
      case 'k':
        return unsupported(start, "named backreference '\\k'");
      default:
        if (c >= '1' && c <= '9')
          return unsupported(start, "backreference '\\" + std::string(1, c) + "'");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
          return unsupported(start, "escape '\\" + std::string(1, c) + "'");
        }
        --pos_;
        ASSIGN_OR_RETURN(uint32_t cp, next_code_point());
        return std::optional<uint32_t>(cp);
    }
  }

  StatusOr<Fragment> class_fragment(const Ranges& r, bool negate) {
    return builder_.code_point_ranges(normalize_ranges(r, negate));
  }

  StatusOr<Fragment> parse_class() {
    size_t start = pos_;
    ++pos_;  // '['
    bool negate = false;
    if (peek() == '^') {
      negate = true;
      ++pos_;
    }
    Ranges ranges;
    // Negated shorthands inside a class ([\D]) are unions with a complement.
    Ranges extra;
    bool first = true;
    while (true) {
      if (at_end()) return error_at(start, "unterminated character class");
      if (peek() == ']' && !first) break;
      first = false;
      if (peek() == '[' && (peek(1) == ':' || peek(1) == '=' || peek(1) == '.')) {
        return unsupported(pos_, "POSIX class '[:...:]'");
      }
      std::optional<uint32_t> lo;
      if (peek() == '\\') {
        ++pos_;
        Ranges sh;
        bool neg = false;
        ASSIGN_OR_RETURN(lo, parse_escape(&sh, &neg, true, negate));
        if (!lo) {
          for (auto r : normalize_ranges(sh, neg)) extra.push_back(r);
          continue;
        }
      } else {
        ASSIGN_OR_RETURN(uint32_t cp, next_code_point());
        lo = cp;
      }
      uint32_t hi = *lo;
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
        size_t dash = pos_;
        ++pos_;
        if (peek() == '\\') {
          ++pos_;
          Ranges sh;
          bool neg = false;
          ASSIGN_OR_RETURN(auto h, parse_escape(&sh, &neg, true));
          if (!h) return error_at(dash, "class range ends in a shorthand like \\d");
          hi = *h;
        } else {
          ASSIGN_OR_RETURN(hi, next_code_point());
        }
        if (hi < *lo) return error_at(dash, "character range is out of order");
      }
      ranges.emplace_back(*lo, hi);
    }
    ++pos_;
    for (auto r : extra) ranges.push_back(r);
    return class_fragment(ranges, negate);
  }

  StatusOr<Fragment> parse_atom(int depth, bool at_start) {
    size_t start = pos_;
    char c = peek();
    switch (c) {
      case '(': {
        ++pos_;
        if (peek() == '?') {
          if (peek(1) == ':') {
            pos_ += 2;
          } else if (peek(1) == 'P' && peek(2) == '<') {
            pos_ += 3;
            while (!at_end() && peek() != '>') ++pos_;
            if (at_end()) return error_at(start, "unterminated group name");
            ++pos_;
          } else if (peek(1) == '<' && peek(2) != '=' && peek(2) != '!') {
            pos_ += 2;
            while (!at_end() && peek() != '>') ++pos_;
            if (at_end()) return error_at(start, "unterminated group name");
            ++pos_;
          } else if (peek(1) == '=' || peek(1) == '!' || peek(1) == '<') {
            return unsupported(start, "lookaround '(?" + std::string(1, peek(1)) + "'");
          } else {
            return unsupported(start, "group modifier '(?" + char_for_message(p_, pos_ + 1) + "'");
          }
        }
        ASSIGN_OR_RETURN(Fragment f, parse_alternation(depth + 1, at_start));
        if (peek() != ')') return error_at(start, "unclosed '('");
        ++pos_;
        return f;
      }
      case '[':
        return parse_class();
      case '.':
        ++pos_;
        return class_fragment({{'\n', '\n'}}, true);
      case '*':
      case '+':
      case '?':
        return error("quantifier '" + std::string(1, c) + "' has nothing to repeat");
      case '\\': {
        ++pos_;
        Ranges sh;
        bool neg = false;
        ASSIGN_OR_RETURN(auto cp, parse_escape(&sh, &neg, false));
        if (!cp) return class_fragment(sh, neg);
        std::string s;
        append_utf8(*cp, &s);
        return builder_.literal(s);
      }
      default: {
        ASSIGN_OR_RETURN(uint32_t cp, next_code_point());
        std::string s;
        append_utf8(cp, &s);
        return builder_.literal(s);
      }
    }
  }

  std::string_view p_;
  size_t pos_ = 0;
  GrammarBuilder builder_;
  // Set while parsing an atom that holds an anchor ('^' or '$') / a '$'.
  bool anchor_in_atom_ = false;
  bool dollar_in_atom_ = false;
};

}  // namespace

StatusOr<Grammar> parse_regex(std::string_view pattern) {
  RegexParser parser(pattern);
  return parser.parse();
}

}  // namespace deepinfer::grammar

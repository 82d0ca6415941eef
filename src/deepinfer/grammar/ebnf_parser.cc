#include "deepinfer/grammar/ebnf_parser.h"

#include <map>
#include <optional>
#include <string>

#include "deepinfer/grammar/utf8_decode.h"

namespace deepinfer::grammar {
namespace {

using Fragment = GrammarBuilder::Fragment;

// Repetition bounds past this would blow up the grammar; xgrammar has a similar cap.
constexpr int kMaxRepeat = 1000;
constexpr int kMaxDepth = 200;

class EbnfParser {
 public:
  explicit EbnfParser(std::string_view text) : text_(text) {}

  StatusOr<Grammar> parse(std::string_view root_rule) {
    skip_space();
    if (at_end()) return error("empty grammar: no rules");
    while (!at_end()) {
      RETURN_IF_ERROR(parse_rule());
      skip_space();
    }
    for (const auto& [name, info] : rules_) {
      if (!info.defined) {
        return invalid_argument(where(info.first_use) + "rule '" + name +
                                "' is referenced but not defined");
      }
    }
    auto it = rules_.find(std::string(root_rule));
    if (it == rules_.end()) {
      return invalid_argument("ebnf: no rule named '" + std::string(root_rule) +
                              "' (the start rule)");
    }
    if (builder_.too_large()) return grammar_size_error("ebnf: the grammar", false);
    Grammar g = std::move(builder_).finish(it->second.id);
    RETURN_IF_ERROR(check_grammar_size(g, /*expanded=*/true, "ebnf: the grammar"));
    return g;
  }

 private:
  struct RuleInfo {
    uint32_t id;
    bool defined = false;
    size_t first_use = 0;
  };

  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  std::string where(size_t offset) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return "ebnf line " + std::to_string(line) + ":" + std::to_string(col) + ": ";
  }
  Status error(const std::string& m) const { return invalid_argument(where(pos_) + m); }
  Status error_at(size_t offset, const std::string& m) const {
    return invalid_argument(where(offset) + m);
  }

  void skip_space() {
    while (!at_end()) {
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  static bool is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  static bool is_name_char(char c) {
    return is_name_start(c) || (c >= '0' && c <= '9') || c == '-';
  }

  std::string parse_name() {
    size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // True when the text at pos_ is `name ::=`, i.e. the start of the next rule.
  bool at_rule_start() const {
    size_t p = pos_;
    if (p >= text_.size() || !is_name_start(text_[p])) return false;
    while (p < text_.size() && is_name_char(text_[p])) ++p;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  RuleInfo& rule_info(const std::string& name, size_t use) {
    auto it = rules_.find(name);
    if (it == rules_.end()) {
      it = rules_.emplace(name, RuleInfo{builder_.add_rule(name), false, use}).first;
    }
    return it->second;
  }

  Status parse_rule() {
    size_t start = pos_;
    if (!is_name_start(peek())) return error("expected a rule name");
    std::string name = parse_name();
    while (peek() == ' ' || peek() == '\t') ++pos_;
    if (text_.substr(pos_, 3) != "::=")
      return error("expected '::=' after rule name '" + name + "'");
    pos_ += 3;
    RuleInfo& info = rule_info(name, start);
    if (info.defined) return error_at(start, "rule '" + name + "' is defined twice");
    info.defined = true;
    uint32_t id = info.id;
    ASSIGN_OR_RETURN(Fragment body, parse_alternatives(0));
    if (!at_end() && !at_rule_start()) {
      if (peek() == ')') return error("unbalanced ')'");
      return error("unexpected character '" + char_for_message(text_, pos_) + "'");
    }
    builder_.rule(id).alternatives = std::move(body);
    return ok_status();
  }

  StatusOr<Fragment> parse_alternatives(int depth) {
    if (depth > kMaxDepth) return error("nesting too deep");
    Fragment result;
    while (true) {
      ASSIGN_OR_RETURN(Fragment seq, parse_sequence(depth));
      for (auto& s : seq) result.push_back(std::move(s));
      skip_space();
      if (peek() != '|') break;
      ++pos_;
    }
    return result;
  }

  StatusOr<Fragment> parse_sequence(int depth) {
    Fragment seq = {Sequence{}};
    while (true) {
      skip_space();
      if (at_end() || peek() == '|' || peek() == ')' || at_rule_start()) break;
      ASSIGN_OR_RETURN(Fragment item, parse_postfix(depth));
      seq = builder_.concat(seq, item, "seq");
    }
    return seq;
  }

  StatusOr<Fragment> parse_postfix(int depth) {
    ASSIGN_OR_RETURN(Fragment f, parse_primary(depth));
    while (true) {
      char c = peek();
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
        ++pos_;
        ASSIGN_OR_RETURN(auto bounds, parse_bounds());
        f = builder_.repeat(f, bounds.first, bounds.second, "rep");
      } else {
        break;
      }
    }
    return f;
  }

  std::optional<int> parse_int() {
    size_t start = pos_;
    long v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > 1000000) v = 1000000;
      ++pos_;
    }
    if (pos_ == start) return std::nullopt;
    return static_cast<int>(v);
  }

  // After '{': m}, m,}, m,n}.
  StatusOr<std::pair<int, int>> parse_bounds() {
    size_t start = pos_ - 1;
    auto skip_blank = [&] {
      while (peek() == ' ') ++pos_;
    };
    skip_blank();
    auto lo = parse_int();
    if (!lo) return error("expected a number in repetition {m,n}");
    skip_blank();
    int hi = *lo;
    if (peek() == ',') {
      ++pos_;
      skip_blank();
      auto h = parse_int();
      hi = h ? *h : -1;
      skip_blank();
    }
    if (peek() != '}') return error("expected '}' to close repetition");
    ++pos_;
    if (hi >= 0 && hi < *lo) return error_at(start, "repetition {m,n} has n < m");
    if (*lo > kMaxRepeat || hi > kMaxRepeat) {
      return error_at(start, "repetition bound over " + std::to_string(kMaxRepeat));
    }
    return std::make_pair(*lo, hi);
  }

  // Decodes one UTF-8 code point of the source text.
  StatusOr<uint32_t> next_code_point() {
    std::optional<uint32_t> cp = decode_utf8(text_, &pos_);
    if (!cp) return error("invalid UTF-8 in grammar text");
    return *cp;
  }

  StatusOr<uint32_t> parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      char c = peek();
      int d = (c >= '0' && c <= '9')   ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : -1;
      if (d < 0) return error("expected " + std::to_string(digits) + " hex digits");
      v = v * 16 + d;
      ++pos_;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return error("escape is not a code point");
    return v;
  }

  // One character of a literal or class, escapes resolved.
  StatusOr<uint32_t> parse_char() {
    if (peek() != '\\') return next_code_point();
    size_t start = pos_;
    ++pos_;
    char c = peek();
    ++pos_;
    switch (c) {
      case 'n':
        return uint32_t{'\n'};
      case 'r':
        return uint32_t{'\r'};
      case 't':
        return uint32_t{'\t'};
      case '\\':
        return uint32_t{'\\'};
      case '"':
        return uint32_t{'"'};
      case '\'':
        return uint32_t{'\''};
      case '[':
        return uint32_t{'['};
      case ']':
        return uint32_t{']'};
      case '-':
        return uint32_t{'-'};
      case '^':
        return uint32_t{'^'};
      case 'x':
        return parse_hex(2);
      case 'u':
        return parse_hex(4);
      case 'U':
        return parse_hex(8);
      default:
        return error_at(start, "unknown escape '\\" + char_for_message(text_, start + 1) + "'");
    }
  }

  StatusOr<Fragment> parse_primary(int depth) {
    size_t start = pos_;
    char c = peek();
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (true) {
        if (at_end() || peek() == '\n') return error_at(start, "unterminated string literal");
        if (peek() == '"') break;
        ASSIGN_OR_RETURN(uint32_t cp, parse_char());
        append_utf8(cp, &bytes);
      }
      ++pos_;
      return builder_.literal(bytes);
    }
    if (c == '[') {
      ++pos_;
      bool negate = false;
      if (peek() == '^') {
        negate = true;
        ++pos_;
      }
      std::vector<std::pair<uint32_t, uint32_t>> ranges;
      while (true) {
        if (at_end() || peek() == '\n') return error_at(start, "unterminated character class");
        if (peek() == ']') break;
        ASSIGN_OR_RETURN(uint32_t lo, parse_char());
        uint32_t hi = lo;
        if (peek() == '-' && peek(1) != ']') {
          ++pos_;
          if (at_end()) return error_at(start, "unterminated character class");
          size_t range_pos = pos_;
          ASSIGN_OR_RETURN(hi, parse_char());
          if (hi < lo) return error_at(range_pos, "character range is out of order");
        }
        ranges.emplace_back(lo, hi);
      }
      ++pos_;
      return builder_.code_point_ranges(normalize_ranges(std::move(ranges), negate));
    }
    if (c == '(') {
      ++pos_;
      ASSIGN_OR_RETURN(Fragment f, parse_alternatives(depth + 1));
      skip_space();
      if (peek() != ')') return error_at(start, "unclosed '('");
      ++pos_;
      return f;
    }
    if (is_name_start(c)) {
      std::string name = parse_name();
      return Fragment{Sequence{{Element::Kind::kRule, rule_info(name, start).id}}};
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') {
      return error("'" + std::string(1, c) + "' has nothing to repeat");
    }
    return error("unexpected character '" + char_for_message(text_, pos_) + "'");
  }

  std::string_view text_;
  size_t pos_ = 0;
  GrammarBuilder builder_;
  std::map<std::string, RuleInfo> rules_;
};

}  // namespace

StatusOr<Grammar> parse_ebnf(std::string_view text, std::string_view root_rule) {
  EbnfParser parser(text);
  return parser.parse(root_rule);
}

}  // namespace deepinfer::grammar

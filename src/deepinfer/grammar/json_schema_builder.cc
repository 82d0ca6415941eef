#include "deepinfer/grammar/json_schema_builder.h"

#include <map>
#include <memory>

#include "deepinfer/grammar/json_schema_primitives.h"
#include "deepinfer/grammar/regex_parser.h"
#include "deepinfer/grammar/utf8_decode.h"

namespace deepinfer::grammar::json_detail {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

ByteSet set_of(std::string_view chars) {
  ByteSet s;
  for (unsigned char c : chars) s.set(c);
  return s;
}

// Code points that stand for themselves inside a JSON string.
Ranges raw_string_ranges() {
  return normalize_ranges({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}}, false);
}

}  // namespace

JsonBuilder::JsonBuilder(int max_whitespace, bool flexible_whitespace) {
  if (max_whitespace <= 0) {
    uint32_t r = b_.add_rule("ws");
    b_.rule(r).alternatives = {Sequence{}};
    ws_ = {Element::Kind::kRule, r};
  } else if (flexible_whitespace) {
    ws_ = repeat(b_.bytes(set_of(" \t\n\r")), 0, max_whitespace, "ws");
  } else {
    // A model that loops on whitespace gets one newline per gap, not a page of them.
    const Element indent = repeat(b_.bytes(set_of(" \t")), 0, max_whitespace, "indent");
    ws_ = rule_of({Sequence{}, Sequence{lit(" ", "sp")}, Sequence{lit("\n", "nl"), indent}}, "ws");
  }
}

Element JsonBuilder::lit(std::string_view s, std::string_view hint) {
  return b_.as_element(b_.literal(s), hint);
}

Element JsonBuilder::exactly(Element x, int64_t n, std::string_view hint) {
  // One run of n copies: its positions deep inside look alike to the matcher's state keys
  // (lookahead_canon.cc), so a long minLength costs one cached mask, not one walk per position.
  if (n <= kLinearUpTo) return b_.as_element({Sequence(static_cast<size_t>(n), x)}, hint);
  // Binary powers x^(2^k), so x{n} needs O(log n) rules.
  Sequence seq;
  Element power = x;
  while (n > 0) {
    if (n & 1) seq.push_back(power);
    n >>= 1;
    if (n > 0) power = b_.as_element({Sequence{power, power}}, hint);
  }
  return b_.as_element({seq}, hint);
}

Element JsonBuilder::up_to(Element x, int64_t n, std::string_view hint) {
  if (n <= kLinearUpTo) {
    // The builder's nested optionals (n rules): every prefix has one parse and the pending
    // completions form one deterministic (Leo) chain, so a matcher's state key stays a few
    // items long at any count. The binary form below has many live parses per prefix and a
    // key that grows with the count (maxLength 5000: thousands of words per mask lookup).
    return b_.as_element(b_.repeat({Sequence{x}}, 0, static_cast<int>(n), hint), hint);
  }
  // x{0,2k+1} = x? (xx){0,k};  x{0,2k} = "" | x x? (xx){0,k-1}. Each count has one parse.
  // Here n > kLinearUpTo, so the halves are linear.
  Element xx = b_.as_element({Sequence{x, x}}, hint);
  const int64_t k = n / 2;
  if (n % 2 == 1) {
    Element rest = up_to(xx, k, hint);
    return b_.as_element({Sequence{rest}, Sequence{x, rest}}, hint);
  }
  Element rest = up_to(xx, k - 1, hint);
  return b_.as_element({Sequence{}, Sequence{x, rest}, Sequence{x, x, rest}}, hint);
}

Element JsonBuilder::repeat(Element x, int64_t min, std::optional<int64_t> max,
                            std::string_view hint) {
  Sequence seq;
  if (min > 0) seq.push_back(exactly(x, min, hint));
  if (!max) {
    Fragment tail = b_.star({Sequence{x}}, hint);
    seq.insert(seq.end(), tail[0].begin(), tail[0].end());
  } else if (*max > min) {
    seq.push_back(up_to(x, *max - min, hint));
  }
  return b_.as_element({seq}, hint);
}

Element JsonBuilder::string_char() {
  if (string_char_) return *string_char_;
  Fragment alts = b_.code_point_ranges(raw_string_ranges());
  ByteSet hex = set_of("0123456789abcdefABCDEF");
  Element h = b_.bytes(hex);
  Element bs = b_.bytes(set_of("\\"));
  Element u = b_.bytes(set_of("u"));
  alts.push_back(Sequence{bs, b_.bytes(set_of("\"\\/bfnrt"))});
  // \uXXXX outside the surrogate block, or a high+low surrogate pair (one code point).
  alts.push_back(Sequence{bs, u, b_.bytes(set_of("0123456789abcABCeEfF")), h, h, h});
  Element d = b_.bytes(set_of("dD"));
  alts.push_back(Sequence{bs, u, d, b_.bytes(set_of("01234567")), h, h});
  alts.push_back(Sequence{bs, u, d, b_.bytes(set_of("89abAB")), h, h, bs, u, d,
                          b_.bytes(set_of("cdefCDEF")), h, h});
  string_char_ = b_.as_element(alts, "char");
  return *string_char_;
}

Element JsonBuilder::string(int64_t min_len, std::optional<int64_t> max_len) {
  bool generic = min_len == 0 && !max_len;
  if (generic && string_) return *string_;
  Element q = b_.bytes(set_of("\""));
  Element body = repeat(string_char(), min_len, max_len, "chars");
  Element s = b_.as_element({Sequence{q, body, q}}, "string");
  if (generic) string_ = s;
  return s;
}

Element JsonBuilder::string_not_in(const std::vector<std::string>& names) {
  if (!raw_char_) raw_char_ = b_.as_element(b_.code_point_ranges(raw_string_ranges()), "rawchar");
  Element raw_star = b_.as_element(b_.star({Sequence{*raw_char_}}, "rawchars"), "rawchars");
  // A trie over the code points of the names that are writable without escapes.
  struct Node {
    bool word = false;
    std::map<uint32_t, int> kids;
  };
  std::vector<Node> nodes(1);
  for (const std::string& name : names) {
    std::vector<uint32_t> cps;
    bool raw = true;
    for (size_t pos = 0; pos < name.size();) {
      auto cp = decode_utf8(name, &pos);
      if (!cp || *cp < 0x20 || *cp == '"' || *cp == '\\') {
        raw = false;
        break;
      }
      cps.push_back(*cp);
    }
    if (!raw) continue;
    int at = 0;
    for (uint32_t cp : cps) {
      auto it = nodes[at].kids.find(cp);
      if (it == nodes[at].kids.end()) {
        nodes.push_back(Node{});
        it = nodes[at].kids.emplace(cp, static_cast<int>(nodes.size() - 1)).first;
      }
      at = it->second;
    }
    nodes[at].word = true;
  }
  // N(node) = ("" unless a name ends here) | other-char raw* | c N(child) for each child c.
  std::vector<uint32_t> rule_of_node(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    rule_of_node[i] = b_.add_rule("key_" + std::to_string(i));
  for (size_t i = 0; i < nodes.size(); ++i) {
    Fragment alts;
    if (!nodes[i].word) alts.push_back(Sequence{});
    Ranges used;
    for (auto [cp, kid] : nodes[i].kids) used.emplace_back(cp, cp);
    Ranges other;
    for (auto [lo, hi] : raw_string_ranges()) {
      uint32_t next = lo;
      for (auto [c, c2] : used) {
        if (c < next || c > hi) continue;
        if (c > next) other.emplace_back(next, c - 1);
        next = c + 1;
      }
      if (next <= hi) other.emplace_back(next, hi);
    }
    if (!other.empty()) {
      Element o = b_.as_element(b_.code_point_ranges(other), "keychar");
      alts.push_back(Sequence{o, raw_star});
    }
    for (auto [cp, kid] : nodes[i].kids) {
      std::string bytes;
      append_utf8(cp, &bytes);
      Sequence seq = b_.literal(bytes)[0];
      seq.push_back({Element::Kind::kRule, rule_of_node[kid]});
      alts.push_back(seq);
    }
    b_.rule(rule_of_node[i]).alternatives = std::move(alts);
  }
  Element q = b_.bytes(set_of("\""));
  return b_.as_element({Sequence{q, {Element::Kind::kRule, rule_of_node[0]}, q}}, "extrakey");
}

StatusOr<Element> JsonBuilder::regex(std::string_view pattern, bool json_string,
                                     std::string_view hint) {
  ASSIGN_OR_RETURN(Grammar g, parse_regex(pattern));
  return embed(g, json_string, hint);
}

Element JsonBuilder::embed(const Grammar& g, bool json_string, std::string_view hint) {
  b_.count_elements(num_elements(g));
  return embed_grammar(g, &b_, json_string, hint);
}

Element JsonBuilder::number() {
  if (!number_) {
    auto e = regex("-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?", false, "number");
    number_ = *e;  // a fixed, valid pattern
  }
  return *number_;
}

Element JsonBuilder::integer() {
  if (!integer_) integer_ = *regex("-?(?:0|[1-9][0-9]*)", false, "integer");
  return *integer_;
}

Element JsonBuilder::delimited(char open, Element item, char close, std::string_view hint) {
  Element comma = b_.as_element({Sequence{ws_, b_.bytes(set_of(",")), ws_}}, "comma");
  Fragment more = b_.star({Sequence{comma, item}}, hint);
  Sequence items = {item};
  items.insert(items.end(), more[0].begin(), more[0].end());
  Element o = b_.bytes(set_of(std::string(1, open)));
  Element c = b_.bytes(set_of(std::string(1, close)));
  Element body = b_.as_element({items}, hint);
  return b_.as_element({Sequence{o, ws_, c}, Sequence{o, ws_, body, ws_, c}}, hint);
}

Element JsonBuilder::any_value() {
  if (any_value_) return *any_value_;
  uint32_t r = b_.add_rule("value");
  any_value_ = Element{Element::Kind::kRule, r};
  Element colon = b_.as_element({Sequence{ws_, b_.bytes(set_of(":")), ws_}}, "colon");
  Element member = b_.as_element({Sequence{string(0, std::nullopt), colon, *any_value_}}, "member");
  any_object_ = delimited('{', member, '}', "object");
  any_array_ = delimited('[', *any_value_, ']', "array");
  Fragment alts = {Sequence{*any_object_}, Sequence{*any_array_}, Sequence{string(0, std::nullopt)},
                   Sequence{number()}};
  for (const char* word : {"true", "false", "null"}) alts.push_back(b_.literal(word)[0]);
  b_.rule(r).alternatives = std::move(alts);
  return *any_value_;
}

Element JsonBuilder::any_object() {
  any_value();
  return *any_object_;
}

Element JsonBuilder::any_array() {
  any_value();
  return *any_array_;
}

Grammar JsonBuilder::finish(Element root) && {
  uint32_t r = b_.add_rule("root");
  b_.rule(r).alternatives = {Sequence{root}};
  return std::move(b_).finish(r);
}

}  // namespace deepinfer::grammar::json_detail

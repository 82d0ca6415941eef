#include "deepinfer/grammar/grammar.h"

#include <algorithm>

#include "deepinfer/base/check.h"

namespace deepinfer::grammar {
namespace {

std::array<uint64_t, 4> key_of(const ByteSet& set) {
  std::array<uint64_t, 4> key{};
  for (int b = 0; b < 256; ++b)
    if (set.test(b)) key[b / 64] |= uint64_t{1} << (b % 64);
  return key;
}

int utf8_encode(uint32_t cp, uint8_t* out) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;

// Splits [lo, hi] until each piece is a cross product of byte ranges (the utf8-ranges method).
void split_utf8(uint32_t lo, uint32_t hi, std::vector<ByteRanges>* out) {
  if (lo > hi) return;
  for (uint32_t boundary : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= boundary && hi > boundary) {
      split_utf8(lo, boundary, out);
      split_utf8(boundary + 1, hi, out);
      return;
    }
  }
  for (int i = 1; i < 4; ++i) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_utf8(lo, lo | m, out);
        split_utf8((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_utf8(lo, (hi & ~m) - 1, out);
        split_utf8(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  int n = utf8_encode(lo, a);
  int n2 = utf8_encode(hi, b);
  DI_CHECK(n == n2);
  ByteRanges r;
  for (int i = 0; i < n; ++i) r.emplace_back(a[i], b[i]);
  out->push_back(std::move(r));
}

}  // namespace

void append_utf8(uint32_t cp, std::string* out) {
  uint8_t buf[4];
  int n = utf8_encode(cp, buf);
  out->append(reinterpret_cast<const char*>(buf), n);
}

std::vector<std::pair<uint32_t, uint32_t>> normalize_ranges(
    std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negate) {
  // Surrogates are not encodable in valid UTF-8, so they are carved out first.
  ranges.emplace_back(0xD800, 0xDFFF);
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (auto [lo, hi] : ranges) {
    if (lo > hi) continue;
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.emplace_back(lo, hi);
    }
  }
  std::vector<std::pair<uint32_t, uint32_t>> result;
  if (negate) {
    uint32_t next = 0;
    for (auto [lo, hi] : merged) {
      if (lo > next) result.emplace_back(next, lo - 1);
      next = hi + 1;
    }
    if (next <= 0x10FFFF) result.emplace_back(next, 0x10FFFF);
  } else {
    result = merged;
  }
  // Remove the surrogate block again (it was added to the set, or it is covered by it).
  std::vector<std::pair<uint32_t, uint32_t>> clean;
  for (auto [lo, hi] : result) {
    hi = std::min<uint32_t>(hi, 0x10FFFF);
    if (lo > hi) continue;
    if (hi < 0xD800 || lo > 0xDFFF) {
      clean.emplace_back(lo, hi);
      continue;
    }
    if (lo < 0xD800) clean.emplace_back(lo, 0xD7FF);
    if (hi > 0xDFFF) clean.emplace_back(0xE000, hi);
  }
  return clean;
}

uint32_t GrammarBuilder::add_rule(std::string name) {
  grammar_.rules.push_back(Rule{std::move(name), {}});
  return static_cast<uint32_t>(grammar_.rules.size() - 1);
}

std::string GrammarBuilder::fresh_name(std::string_view hint) {
  return std::string(hint) + "_" + std::to_string(anon_counter_++);
}

Element GrammarBuilder::bytes(const ByteSet& set) {
  auto key = key_of(set);
  auto it = byte_set_ids_.find(key);
  if (it != byte_set_ids_.end()) return {Element::Kind::kBytes, it->second};
  uint32_t id = static_cast<uint32_t>(grammar_.byte_sets.size());
  grammar_.byte_sets.push_back(set);
  byte_set_ids_.emplace(key, id);
  return {Element::Kind::kBytes, id};
}

GrammarBuilder::Fragment GrammarBuilder::literal(std::string_view s) {
  Sequence seq;
  for (unsigned char c : s) {
    ByteSet set;
    set.set(c);
    seq.push_back(bytes(set));
  }
  return {seq};
}

GrammarBuilder::Fragment GrammarBuilder::literals(std::vector<std::string> texts,
                                                  std::string_view hint) {
  std::sort(texts.begin(), texts.end());
  texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
  // The texts [lo, hi) share their first `depth` bytes; their alternatives past them.
  const auto node = [&](auto&& self, size_t lo, size_t hi, size_t depth) -> Fragment {
    Fragment alts;
    if (texts[lo].size() == depth) {  // sorted: the one text that ends here comes first
      alts.push_back({});
      ++lo;
    }
    while (lo < hi) {
      size_t end = lo + 1;
      while (end < hi && texts[end][depth] == texts[lo][depth]) ++end;
      // The group's common prefix: that of its first and last (sorted).
      size_t common = depth + 1;
      const std::string &first = texts[lo], &last = texts[end - 1];
      while (common < first.size() && common < last.size() && first[common] == last[common])
        ++common;
      Sequence seq = literal(std::string_view(first).substr(depth, common - depth))[0];
      if (end - lo > 1 || first.size() > common) {
        const Fragment rest = self(self, lo, end, common);
        seq.push_back(as_element(rest, hint));
      }
      alts.push_back(std::move(seq));
      lo = end;
    }
    return alts;
  };
  if (texts.empty()) return {};
  return node(node, 0, texts.size(), 0);
}

GrammarBuilder::Fragment GrammarBuilder::code_point_ranges(
    const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  std::vector<ByteRanges> pieces;
  for (auto [lo, hi] : ranges) split_utf8(lo, hi, &pieces);
  // All one-byte pieces fold into a single byte set: ASCII classes stay one element.
  ByteSet single;
  Fragment f;
  for (const ByteRanges& p : pieces) {
    if (p.size() == 1) {
      for (int b = p[0].first; b <= p[0].second; ++b) single.set(b);
      continue;
    }
    Sequence seq;
    for (auto [lo, hi] : p) {
      ByteSet set;
      for (int b = lo; b <= hi; ++b) set.set(b);
      seq.push_back(bytes(set));
    }
    f.push_back(std::move(seq));
  }
  if (single.any()) f.insert(f.begin(), Sequence{bytes(single)});
  if (f.empty()) f.push_back(Sequence{bytes(ByteSet())});  // matches nothing
  return f;
}

void GrammarBuilder::count_elements(uint64_t n) {
  elements_ += n;
  if (elements_ > kMaxGrammarElements) too_large_ = true;
}

Element GrammarBuilder::as_element(const Fragment& f, std::string_view hint) {
  if (f.size() == 1 && f[0].size() == 1) return f[0][0];
  for (const Sequence& s : f) elements_ += s.size();
  uint32_t id = add_rule(fresh_name(hint));
  grammar_.rules[id].alternatives = f;
  return {Element::Kind::kRule, id};
}

GrammarBuilder::Fragment GrammarBuilder::concat(const Fragment& a, const Fragment& b,
                                                std::string_view hint) {
  if (a.size() == 1 && b.size() == 1) {
    Sequence s = a[0];
    s.insert(s.end(), b[0].begin(), b[0].end());
    return {s};
  }
  Sequence s;
  if (a.size() == 1) {
    s = a[0];
  } else {
    s.push_back(as_element(a, hint));
  }
  if (b.size() == 1) {
    s.insert(s.end(), b[0].begin(), b[0].end());
  } else {
    s.push_back(as_element(b, hint));
  }
  return {s};
}

GrammarBuilder::Fragment GrammarBuilder::star(const Fragment& f, std::string_view hint) {
  Element x = as_element(f, hint);
  uint32_t r = add_rule(fresh_name(hint));
  Element self{Element::Kind::kRule, r};
  grammar_.rules[r].alternatives = {Sequence{}, Sequence{self, x}};
  elements_ += 2;
  return {Sequence{self}};
}

GrammarBuilder::Fragment GrammarBuilder::plus(const Fragment& f, std::string_view hint) {
  Element x = as_element(f, hint);
  uint32_t r = add_rule(fresh_name(hint));
  Element self{Element::Kind::kRule, r};
  grammar_.rules[r].alternatives = {Sequence{x}, Sequence{self, x}};
  elements_ += 3;
  return {Sequence{self}};
}

GrammarBuilder::Fragment GrammarBuilder::optional(const Fragment& f, std::string_view hint) {
  Fragment out = f;
  bool has_empty = std::any_of(f.begin(), f.end(), [](const Sequence& s) { return s.empty(); });
  if (!has_empty) out.insert(out.begin(), Sequence{});
  return out;
}

GrammarBuilder::Fragment GrammarBuilder::repeat(const Fragment& f, int min, int max,
                                                std::string_view hint) {
  // Each optional level costs two elements (x and the next level). Past the limit nothing is
  // built, so a pattern of many large counts cannot exhaust memory before the front end fails.
  const uint64_t cost =
      static_cast<uint64_t>(min) + 2 * static_cast<uint64_t>(std::max(max - min, 1));
  if (too_large_ || elements_ + cost > kMaxGrammarElements) {
    too_large_ = true;
    return {Sequence{}};
  }
  Element x = as_element(f, hint);
  Sequence prefix(min, x);
  if (max < 0) {
    Fragment tail = star({Sequence{x}}, hint);
    prefix.insert(prefix.end(), tail[0].begin(), tail[0].end());
    return {prefix};
  }
  // Nested optionals (x (x (x)?)?)? keep the grammar unambiguous, so Earley sets stay small.
  Fragment tail = {Sequence{}};
  for (int i = 0; i < max - min; ++i) {
    Fragment inner = concat({Sequence{x}}, tail, hint);
    tail = {Sequence{}, inner[0]};
    if (i + 1 < max - min) tail = {Sequence{as_element(tail, hint)}};
  }
  if (tail.size() == 1) {
    prefix.insert(prefix.end(), tail[0].begin(), tail[0].end());
    return {prefix};
  }
  if (prefix.empty()) return tail;
  prefix.push_back(as_element(tail, hint));
  return {prefix};
}

uint64_t num_elements(const Grammar& g) {
  uint64_t n = 0;
  for (const Rule& r : g.rules)
    for (const Sequence& s : r.alternatives) n += s.size();
  return n;
}

uint64_t expanded_size(const Grammar& g, uint64_t cap) {
  if (g.root >= g.rules.size()) return 0;
  // Iterative depth-first walk (EBNF rule chains can be deeper than the stack), each rule's
  // size memoized; every partial sum is at most cap + 1, so nothing overflows.
  enum : uint8_t { kNew, kOpen, kDone };
  std::vector<uint8_t> state(g.rules.size(), kNew);
  std::vector<uint64_t> size(g.rules.size(), 0);
  struct Frame {
    uint32_t rule;
    size_t alt = 0, elem = 0;
    uint64_t sum = 0;
  };
  std::vector<Frame> stack = {{g.root}};
  state[g.root] = kOpen;
  while (true) {
    Frame& f = stack.back();
    const Rule& r = g.rules[f.rule];
    if (f.sum > cap) return cap + 1;  // sums only grow up the stack
    if (f.alt == r.alternatives.size()) {
      state[f.rule] = kDone;
      size[f.rule] = f.sum;
      const uint64_t v = f.sum;
      stack.pop_back();
      if (stack.empty()) return v;
      stack.back().sum += std::max<uint64_t>(v, 1);
      ++stack.back().elem;
      continue;
    }
    const Sequence& seq = r.alternatives[f.alt];
    if (f.elem == seq.size()) {
      ++f.alt;
      f.elem = 0;
      continue;
    }
    const Element& e = seq[f.elem];
    if (e.kind == Element::Kind::kBytes || state[e.index] != kNew) {
      const bool sized = e.kind == Element::Kind::kRule && state[e.index] == kDone;
      f.sum += sized ? std::max<uint64_t>(size[e.index], 1) : 1;
      ++f.elem;
      continue;
    }
    state[e.index] = kOpen;
    stack.push_back({e.index});  // f is not used after this
  }
}

Status grammar_size_error(std::string_view what, bool expanded) {
  if (expanded) {
    const std::string n = std::to_string(kMaxExpandedElements);
    return invalid_argument(std::string(what) + " expands to more than " + n +
                            " grammar elements with its repetitions written out (limit " + n +
                            "; nested counted repetitions multiply)");
  }
  const std::string n = std::to_string(kMaxGrammarElements);
  return invalid_argument(std::string(what) + " has more than " + n + " grammar elements (limit " +
                          n + ")");
}

Status check_grammar_size(const Grammar& g, bool expanded, std::string_view what) {
  if (num_elements(g) > kMaxGrammarElements) return grammar_size_error(what, false);
  if (expanded && expanded_size(g, kMaxExpandedElements) > kMaxExpandedElements)
    return grammar_size_error(what, true);
  return ok_status();
}

Grammar GrammarBuilder::finish(uint32_t root) && {
  grammar_.root = root;
  return std::move(grammar_);
}

namespace {

std::string byte_set_string(const ByteSet& set) {
  if (set.count() == 1) {
    for (int b = 0; b < 256; ++b) {
      if (!set.test(b)) continue;
      if (b >= 0x20 && b < 0x7F && b != '"' && b != '\\') return "\"" + std::string(1, b) + "\"";
      char buf[16];
      snprintf(buf, sizeof(buf), "\"\\x%02X\"", b);
      return buf;
    }
  }
  std::string s = "[";
  for (int b = 0; b < 256;) {
    if (!set.test(b)) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && set.test(e + 1)) ++e;
    char buf[32];
    if (e == b) {
      snprintf(buf, sizeof(buf), "\\x%02X", b);
    } else {
      snprintf(buf, sizeof(buf), "\\x%02X-\\x%02X", b, e);
    }
    s += buf;
    b = e + 1;
  }
  return s + "]";
}

}  // namespace

std::string Grammar::to_string() const {
  std::string out;
  for (const Rule& r : rules) {
    out += r.name + " ::=";
    for (size_t a = 0; a < r.alternatives.size(); ++a) {
      if (a > 0) out += " |";
      if (r.alternatives[a].empty()) out += " \"\"";
      for (const Element& e : r.alternatives[a]) {
        out += " ";
        out += e.kind == Element::Kind::kRule ? rules[e.index].name
                                              : byte_set_string(byte_sets[e.index]);
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace deepinfer::grammar

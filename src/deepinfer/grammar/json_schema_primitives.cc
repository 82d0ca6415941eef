#include "deepinfer/grammar/json_schema_primitives.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <vector>

namespace deepinfer::grammar::json_detail {
namespace {

std::string join_alternatives(const std::vector<std::string>& alts) {
  std::string out = "(?:";
  for (size_t i = 0; i < alts.size(); ++i) {
    if (i) out += "|";
    out += alts[i];
  }
  return out + ")";
}

std::string digit_class(char a, char z) {
  if (a == z) return std::string(1, a);
  return std::string("[") + a + "-" + z + "]";
}

bool all_of(const std::string& s, char c) { return s.find_first_not_of(c) == std::string::npos; }

// Equal-length decimal strings lo <= hi (leading zeros allowed inside the recursion).
std::string same_length_range(const std::string& lo, const std::string& hi) {
  if (lo == hi) return lo;
  size_t n = lo.size();
  if (n == 1) return digit_class(lo[0], hi[0]);
  std::string lr = lo.substr(1), hr = hi.substr(1);
  if (lo[0] == hi[0]) return std::string(1, lo[0]) + same_length_range(lr, hr);
  std::vector<std::string> alts;
  char a = lo[0], z = hi[0];
  bool lo_free = all_of(lr, '0'), hi_free = all_of(hr, '9');
  if (!lo_free) {
    alts.push_back(std::string(1, a) + same_length_range(lr, std::string(n - 1, '9')));
    ++a;
  }
  if (!hi_free) --z;
  if (a <= z) alts.push_back(digit_class(a, z) + "[0-9]{" + std::to_string(n - 1) + "}");
  if (!hi_free)
    alts.push_back(std::string(1, hi[0]) + same_length_range(std::string(n - 1, '0'), hr));
  return alts.size() == 1 ? alts[0] : join_alternatives(alts);
}

bool less_number(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

// Non-negative decimal integers in [lo, hi] (hi nullopt = unbounded), given as digit strings.
std::string nonneg_range(const std::string& lo, const std::optional<std::string>& hi) {
  if (hi && less_number(*hi, lo)) return "";
  std::vector<std::string> alts;
  size_t last = hi ? hi->size() : lo.size();
  for (size_t len = lo.size(); len <= last; ++len) {
    std::string low = len == lo.size() ? lo : "1" + std::string(len - 1, '0');
    std::string high = hi && len == hi->size() ? *hi : std::string(len, '9');
    alts.push_back(same_length_range(low, high));
  }
  if (!hi) alts.push_back("[1-9][0-9]{" + std::to_string(lo.size()) + "}[0-9]*");
  return alts.size() == 1 ? alts[0] : join_alternatives(alts);
}

std::string magnitude(int64_t v) {  // |v| as digits, safe for INT64_MIN
  uint64_t m = v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  return std::to_string(m);
}

// Non-negative integers in [lo, hi] where lo >= 0 is a plain count and hi may be absent.
std::string nonneg_between(int64_t lo, std::optional<int64_t> hi) {
  if (hi && *hi < lo) return "";
  return nonneg_range(std::to_string(lo), hi ? std::optional(std::to_string(*hi)) : std::nullopt);
}

}  // namespace

std::string integer_range_regex(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi) return "";
  std::vector<std::string> alts;
  if (!hi || *hi >= 0) {
    std::string r = nonneg_between(lo && *lo > 0 ? *lo : 0, hi);
    if (!r.empty()) alts.push_back(r);
  }
  if (!lo || *lo < 0) {
    // Values -m with m in [max(1, -hi), -lo].
    std::string m_lo = hi && *hi < 0 ? magnitude(*hi) : "1";
    std::optional<std::string> m_hi = lo ? std::optional(magnitude(*lo)) : std::nullopt;
    std::string r = nonneg_range(m_lo, m_hi);
    if (!r.empty()) alts.push_back("-" + r);
  }
  if (alts.empty()) return "";
  return alts.size() == 1 ? alts[0] : join_alternatives(alts);
}

std::string number_range_regex(std::optional<int64_t> lo, bool lo_exclusive,
                               std::optional<int64_t> hi, bool hi_exclusive) {
  std::vector<std::string> alts;
  // Integral values, optionally written with a zero fraction.
  std::optional<int64_t> ilo = lo, ihi = hi;
  if (lo && lo_exclusive) {
    if (*lo == INT64_MAX) return "";
    ilo = *lo + 1;
  }
  if (hi && hi_exclusive) {
    if (*hi == INT64_MIN) return "";
    ihi = *hi - 1;
  }
  std::string integral = integer_range_regex(ilo, ihi);
  if (!integral.empty()) alts.push_back(integral + "(?:\\.0+)?");
  // Non-integral values +-(I + f), 0 < f < 1; exclusivity does not matter for them.
  // The [1-9] is the last non-zero digit, so each fraction has one parse.
  const std::string frac = "\\.[0-9]*[1-9]0*";
  if (!hi || *hi > 0) {  // positive: I in [max(lo, 0), hi - 1]
    int64_t p_lo = lo && *lo > 0 ? *lo : 0;
    std::optional<int64_t> p_hi = hi ? std::optional(*hi - 1) : std::nullopt;
    std::string r = nonneg_between(p_lo, p_hi);
    if (!r.empty()) alts.push_back(r + frac);
  }
  if (!lo || *lo < 0) {  // negative: I in [max(-hi, 0), -lo - 1]
    std::string n_lo = hi && *hi < 0 ? magnitude(*hi) : "0";
    std::optional<std::string> n_hi;
    if (lo) {
      // -lo - 1 = |lo| - 1 without overflow.
      uint64_t m = uint64_t{0} - static_cast<uint64_t>(*lo);
      n_hi = std::to_string(m - 1);
    }
    std::string r = nonneg_range(n_lo, n_hi);
    if (!r.empty()) alts.push_back("-" + r + frac);
  }
  if (alts.empty()) return "";
  return alts.size() == 1 ? alts[0] : join_alternatives(alts);
}

std::optional<std::string> format_regex(std::string_view format) {
  // Year 0001-9999 (Python's date range); leap years for Feb 29.
  const std::string year = "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})";
  const std::string leap =
      "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)";
  const std::string date = "(?:" + year +
                           "-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-"
                           "(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|" +
                           leap + "-02-29)";
  const std::string time =
      "(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?(?:Z|[+-](?:[01][0-9]|2[0-3]):"
      "[0-5][0-9]))";
  if (format == "date") return date;
  if (format == "time") return time;
  if (format == "date-time") return date + "T" + time;
  if (format == "uuid") {
    return "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
  }
  if (format == "ipv4") {
    const std::string octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9][0-9]|[0-9])";
    return octet + "\\." + octet + "\\." + octet + "\\." + octet;
  }
  if (format == "email") {
    // dot-atom local part @ dot-separated LDH labels, at least two of them.
    const std::string atom = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
    const std::string label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    return atom + "(?:\\." + atom + ")*@" + label + "(?:\\." + label + ")+";
  }
  if (format == "hostname") {
    // RFC 1123 labels of at most 62 characters, at most 4 of them: never over 253 characters.
    const std::string label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,60}[A-Za-z0-9])?";
    return label + "(?:\\." + label + "){0,3}";
  }
  if (format == "duration") {
    // RFC 3339 appendix A.
    const std::string time = "T(?:[0-9]+H(?:[0-9]+M)?(?:[0-9]+S)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)";
    return "P(?:(?:[0-9]+Y(?:[0-9]+M)?(?:[0-9]+D)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)(?:" + time + ")?|" +
           time + "|[0-9]+W)";
  }
  if (format == "json-pointer") return "(?:/(?:[^~/]|~[01])*)*";
  if (format == "regex") {
    // Literal characters, '.', \d \w \s and their negations, each optionally quantified,
    // optionally anchored: always a valid ECMA-262 (and Python) regex.
    const std::string atom = "(?:[-A-Za-z0-9_ /,:@]|\\.|\\\\[dwsDWS.])";
    return "\\^?(?:" + atom + "[*+?]?)*\\$?";
  }
  if (format == "uri" || format == "uri-reference") {
    // RFC 3986 URI: scheme ":" hier-part [ "?" query ] [ "#" fragment ], reg-name hosts only.
    const std::string pct = "%[0-9A-Fa-f]{2}";
    const std::string unres_sub = "-A-Za-z0-9._~!$&'()*+,;=";
    const std::string pchar = "(?:[" + unres_sub + ":@]|" + pct + ")";
    const std::string segment = pchar + "*";
    const std::string segment_nz = pchar + "+";
    const std::string userinfo = "(?:(?:[" + unres_sub + ":]|" + pct + ")*@)?";
    const std::string host = "(?:[" + unres_sub + "]|" + pct + ")*";
    const std::string authority = userinfo + host + "(?::[0-9]*)?";
    const std::string hier = "(?://" + authority + "(?:/" + segment + ")*|/(?:" + segment_nz +
                             "(?:/" + segment + ")*)?|" + segment_nz + "(?:/" + segment + ")*|)";
    const std::string tail = "(?:[" + unres_sub + ":@/?]|" + pct + ")*";
    const std::string uri =
        "[A-Za-z][A-Za-z0-9+.-]*:" + hier + "(?:\\?" + tail + ")?(?:#" + tail + ")?";
    if (format == "uri") return uri;
    // relative-ref: "//" authority path-abempty / path-absolute / path-noscheme / path-empty.
    const std::string nc = "(?:[" + unres_sub + "@]|" + pct + ")+";  // segment-nz-nc
    const std::string relative = "(?://" + authority + "(?:/" + segment + ")*|/(?:" + segment_nz +
                                 "(?:/" + segment + ")*)?|" + nc + "(?:/" + segment + ")*|)";
    return "(?:" + uri + "|" + relative + "(?:\\?" + tail + ")?(?:#" + tail + ")?)";
  }
  return std::nullopt;
}

std::string cap_repetitions(const std::string& p, int64_t k) {
  std::string out;
  const std::string ks = std::to_string(k);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      out += c;
      out += p[++i];
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      out += c;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // a leading ']' is literal
      continue;
    }
    if (c == '*' || c == '+') {
      // "(?" opens a group, not a quantifier; "*?" after a quantifier stays lazy.
      out += (c == '*' ? "{0," : "{1,") + ks + "}";
      continue;
    }
    if (c == '{') {  // "{m,}" only; any other brace is left as it is
      size_t j = i + 1;
      while (j < p.size() && std::isdigit(static_cast<unsigned char>(p[j]))) ++j;
      if (j > i + 1 && j - i - 1 <= 9 && j + 1 < p.size() && p[j] == ',' && p[j + 1] == '}') {
        const int64_t m = std::stoll(p.substr(i + 1, j - i - 1));
        out += "{" + std::to_string(m) + "," + std::to_string(std::max(m, k)) + "}";
        i = j + 1;
        continue;
      }
    }
    out += c;
  }
  return out;
}

bool is_standard_format(std::string_view format) {
  static const char* const kNames[] = {"date-time",    "date",          "time",
                                       "duration",     "email",         "idn-email",
                                       "hostname",     "idn-hostname",  "ipv4",
                                       "ipv6",         "uri",           "uri-reference",
                                       "iri",          "iri-reference", "uuid",
                                       "uri-template", "json-pointer",  "relative-json-pointer",
                                       "regex",        "host-name",     "ip-address",
                                       "color",        "utc-millisec",  "style",
                                       "phone"};
  for (const char* n : kNames)
    if (format == n) return true;
  return false;
}

std::pair<int64_t, std::optional<int64_t>> code_point_length_range(const Grammar& g) {
  auto counts = [&](const Element& e) -> std::pair<int64_t, int64_t> {  // (min, max) of a set
    const ByteSet& set = g.byte_sets[e.index];
    bool lead = false, cont = false;
    for (int c = 0; c < 256; ++c) {
      if (!set.test(c)) continue;
      ((c & 0xC0) == 0x80 ? cont : lead) = true;
    }
    return {lead && !cont ? 1 : 0, lead ? 1 : 0};
  };
  constexpr int64_t kInf = int64_t{1} << 50;
  // Fewest: relax until nothing changes (a shortest derivation repeats no rule on a path).
  std::vector<int64_t> lo(g.rules.size(), kInf);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.rules.size(); ++r) {
      for (const Sequence& seq : g.rules[r].alternatives) {
        int64_t sum = 0;
        for (const Element& e : seq)
          sum = std::min(kInf,
                         sum + (e.kind == Element::Kind::kRule ? lo[e.index] : counts(e).first));
        if (sum < lo[r]) lo[r] = sum, changed = true;
      }
    }
  }
  // Most: depth-first; any rule reached again while open is recursion: unbounded.
  std::vector<int> state(g.rules.size(), 0);  // 0 new, 1 open, 2 done
  std::vector<int64_t> hi(g.rules.size(), 0);
  std::function<int64_t(uint32_t)> most = [&](uint32_t r) -> int64_t {
    if (state[r] == 1) return kInf;
    if (state[r] == 2) return hi[r];
    state[r] = 1;
    int64_t best = 0;
    for (const Sequence& seq : g.rules[r].alternatives) {
      int64_t sum = 0;
      for (const Element& e : seq)
        sum = std::min(kInf,
                       sum + (e.kind == Element::Kind::kRule ? most(e.index) : counts(e).second));
      best = std::max(best, sum);
    }
    state[r] = 2;
    return hi[r] = best;
  };
  const int64_t m = most(g.root);
  return {lo[g.root], m >= kInf ? std::nullopt : std::optional<int64_t>(m)};
}

namespace {

// Alternatives that stand for byte c inside a JSON string literal.
std::vector<std::string> escapes_of(uint8_t c) {
  std::vector<std::string> out;
  switch (c) {
    case '"':
      out.push_back("\\\"");
      break;
    case '\\':
      out.push_back("\\\\");
      break;
    case '/':
      out.push_back("\\/");
      break;
    case '\b':
      out.push_back("\\b");
      break;
    case '\f':
      out.push_back("\\f");
      break;
    case '\n':
      out.push_back("\\n");
      break;
    case '\r':
      out.push_back("\\r");
      break;
    case '\t':
      out.push_back("\\t");
      break;
    default:
      break;
  }
  return out;
}

bool must_escape(uint8_t c) { return c < 0x20 || c == '"' || c == '\\'; }

// The rule standing for one byte set inside a JSON string.
Element escaped_set(const ByteSet& set, GrammarBuilder* b, std::string_view hint) {
  GrammarBuilder::Fragment alts;
  ByteSet raw;
  for (int c = 0; c < 256; ++c) {
    if (set.test(c) && !must_escape(static_cast<uint8_t>(c))) raw.set(c);
  }
  if (raw.any()) alts.push_back(Sequence{b->bytes(raw)});
  const char* hex = "0123456789abcdef";
  for (int c = 0; c < 0x80; ++c) {
    if (!set.test(c) || !(must_escape(c) || c == '/')) continue;
    for (const std::string& e : escapes_of(static_cast<uint8_t>(c))) {
      auto lit = b->literal(e);
      alts.push_back(lit[0]);
    }
    // \u00XX with either hex case.
    Sequence u = b->literal("\\u00")[0];
    ByteSet hi, lo;
    hi.set(hex[c >> 4]);
    lo.set(hex[c & 15]);
    lo.set(static_cast<unsigned char>(std::toupper(hex[c & 15])));
    u.push_back(b->bytes(hi));
    u.push_back(b->bytes(lo));
    alts.push_back(u);
  }
  if (alts.empty()) return b->bytes(ByteSet());
  return b->as_element(alts, hint);
}

}  // namespace

Element embed_grammar(const Grammar& g, GrammarBuilder* b, bool json_string,
                      std::string_view hint) {
  uint32_t base = b->num_rules();
  for (const Rule& r : g.rules) b->add_rule(std::string(hint) + "." + r.name);
  std::map<uint32_t, Element> set_elements;
  for (uint32_t i = 0; i < g.rules.size(); ++i) {
    std::vector<Sequence> alts;
    for (const Sequence& seq : g.rules[i].alternatives) {
      Sequence out;
      for (const Element& e : seq) {
        if (e.kind == Element::Kind::kRule) {
          out.push_back({Element::Kind::kRule, base + e.index});
          continue;
        }
        auto it = set_elements.find(e.index);
        if (it == set_elements.end()) {
          const ByteSet& set = g.byte_sets[e.index];
          Element el = json_string ? escaped_set(set, b, hint) : b->bytes(set);
          it = set_elements.emplace(e.index, el).first;
        }
        out.push_back(it->second);
      }
      alts.push_back(std::move(out));
    }
    b->rule(base + i).alternatives = std::move(alts);
  }
  return {Element::Kind::kRule, base + g.root};
}

}  // namespace deepinfer::grammar::json_detail

// SchemaCompiler: strings (lengths, pattern, format, leading lookaheads, `not: {pattern}`).
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "deepinfer/grammar/json_schema_compiler.h"
#include "deepinfer/grammar/json_schema_primitives.h"
#include "deepinfer/grammar/language_product.h"
#include "deepinfer/grammar/regex_parser.h"

namespace deepinfer::grammar::json_detail {
namespace {

// Product automata past this many states are refused (compile time and grammar size).
constexpr size_t kMaxProductStates = 4096;

// Index just past the group that opens at p[open], skipping escapes and classes; npos when it
// is not closed.
size_t group_end(const std::string& p, size_t open) {
  int depth = 0;
  bool in_class = false;
  for (size_t i = open; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      ++i;
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')' && --depth == 0) {
      return i + 1;
    }
  }
  return std::string::npos;
}

bool has_top_level_bar(const std::string& p) {
  int depth = 0;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      ++i;
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == '|' && depth == 0) {
      return true;
    }
  }
  return false;
}

bool ends_with_dollar(const std::string& p) {
  if (p.empty() || p.back() != '$') return false;
  size_t slashes = 0;
  for (size_t i = p.size() - 1; i-- > 0 && p[i] == '\\';) ++slashes;
  return slashes % 2 == 0;
}

// Our shorthands are read as what every dialect agrees on (regex_shorthands.h): \d \s \w
// ASCII, their complements without what any dialect puts in the set; both are narrower than
// some validator's reading, so a pattern using them may match strings ours does not and cannot
// stand for a language to exclude.
bool has_narrower_escapes(const std::string& p) {
  for (size_t i = 0; i + 1 < p.size(); ++i) {
    if (p[i] != '\\') continue;
    if (std::string_view("dswbDSW").find(p[i + 1]) != std::string_view::npos) return true;
    ++i;
  }
  return false;
}

struct Term {
  std::string regex;    // our dialect, full match
  const char* keyword;  // named in errors
  bool then_anything;   // the language is regex followed by any string (LanguageTerm)
};

// What `pattern: p` matches where the spec searches from the start only: p[1:] followed by
// anything, or p[1:-1] and an optional newline where p ends with '$' (Python's '$' also matches
// before a final newline): a superset of the strings the validators find p in. nullopt for
// patterns not anchored at the start, or whose \d \s \w our reading could narrow.
std::optional<Term> anchored_search_superset(const std::string& p, const char* keyword) {
  if (has_narrower_escapes(p) || p.empty() || p[0] != '^' || has_top_level_bar(p))
    return std::nullopt;
  std::string body = p.substr(1);
  if (ends_with_dollar(body)) {
    body.pop_back();
    return Term{"(?:" + body + ")\\n?", keyword, false};
  }
  return Term{body, keyword, true};
}

struct Lookahead {
  std::string body;
  bool negative;
};

// Splits the lookaheads off the start of "^(?=X)(?!Y)R" (R keeps the '^'). Each holds at
// position 0: the string has a prefix X matches.
std::vector<Lookahead> split_leading_lookaheads(std::string* p) {
  std::vector<Lookahead> out;
  while (p->size() > 4 && p->compare(0, 3, "^(?") == 0 && ((*p)[3] == '=' || (*p)[3] == '!')) {
    const size_t end = group_end(*p, 1);
    if (end == std::string::npos) break;
    out.push_back({p->substr(4, end - 5), (*p)[3] == '!'});
    *p = "^" + p->substr(end);
  }
  return out;
}

}  // namespace

StatusOr<Element> SchemaCompiler::string(const Json& s, const std::string& path) {
  if (s.contains(json_detail::kNotInKey)) {  // a narrowed oneOf branch (exclude_values_of)
    for (const char* k : {"pattern", "format", "minLength", "maxLength", kNotPatternKey})
      if (s.contains(k))
        return unsupported("oneOf", path, "strings to strike beside " + std::string(k));
    std::vector<std::string> out;
    for (const Json& x : s[json_detail::kNotInKey])
      if (x.is_string()) out.push_back(x.get<std::string>());
    return jb_.string_not_in(out);
  }
  int64_t min = 0;
  std::optional<int64_t> max;
  bool has_len = s.contains("minLength") || s.contains("maxLength");
  if (s.contains("minLength")) {
    ASSIGN_OR_RETURN(min, count(s, "minLength", path));
  }
  if (s.contains("maxLength")) {
    ASSIGN_OR_RETURN(max, count(s, "maxLength", path));
  }
  if (max && *max < min) return bad(path, "string length range accepts no value");
  // Languages the string must be in (each a subset of what its keyword accepts), and languages
  // it must not be in (each a superset of what its keyword rejects).
  std::vector<Term> positive, negative;
  if (s.contains("format")) {
    if (!s["format"].is_string()) return bad(path + "/format", "must be a string");
    std::string f = s["format"].get<std::string>();
    auto r = json_detail::format_regex(f);
    // A name no draft defines is a custom format: an annotation unless both sides agree on
    // it (validators pass unknown formats), so it constrains nothing.
    if (!r && json_detail::is_standard_format(f))
      return unsupported("format", path, "format '" + f + "' is not supported");
    if (r) positive.push_back({*r, "format", false});
  }
  std::string pattern;
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) return bad(path + "/pattern", "must be a string");
    pattern = s["pattern"].get<std::string>();
    for (const Lookahead& la : split_leading_lookaheads(&pattern)) {
      const bool to_end = ends_with_dollar(la.body);
      if (!la.negative) {
        positive.push_back({la.body, "pattern", !to_end});
        continue;
      }
      auto t = anchored_search_superset("^" + la.body, "pattern");
      if (!t)
        return unsupported("pattern", path,
                           "a negative lookahead using \\d, \\s, \\w, their complements or \\b");
      negative.push_back(*t);
    }
    positive.push_back({pattern, "pattern", false});
  }
  if (s.contains(kNotPatternKey)) {
    for (const Json& x : s[kNotPatternKey]) {
      auto t = anchored_search_superset(x.get<std::string>(), "not");
      if (!t)
        return unsupported("not", path,
                           "a pattern not anchored at the start, or using \\d, \\s, \\w, their "
                           "complements or \\b");
      negative.push_back(*t);
    }
  }
  if (positive.empty() && negative.empty()) return jb_.string(min, max);
  auto fits = [&](const std::string& r) {
    auto g = parse_regex(r);
    if (!g.ok()) return false;
    auto [lo, hi] = json_detail::code_point_length_range(*g);
    return lo >= min && (!max || (hi && *hi <= *max));
  };
  const char* source = positive.empty() ? "not" : positive.back().keyword;
  if (positive.size() == 1 && negative.empty()) {
    std::string re = positive[0].regex;
    bool ok = true;
    if (has_len && !fits(re)) {
      // A length bound that every string of the pattern/format already meets is redundant.
      // Otherwise, with a maxLength, the pattern's unbounded repetitions are capped at the
      // largest k that keeps every string within the bounds (a subset of the pattern); failing
      // that, the length bound joins the product below.
      std::optional<std::string> best;
      if (max && *max >= 1) {
        int64_t lo = 1, hi = std::min<int64_t>(*max, 10000);
        while (lo <= hi) {
          const int64_t k = lo + (hi - lo) / 2;
          std::string r = json_detail::cap_repetitions(re, k);
          if (fits(r)) {
            best = r;
            lo = k + 1;
          } else {
            hi = k - 1;
          }
        }
      }
      ok = best.has_value();
      if (best) re = *best;
    }
    if (ok) {
      // Our regex front end is full-match, so '^'/'$' at the ends are accepted and redundant.
      StatusOr<Element> body = jb_.regex(re, true, source);
      if (!body.ok())
        return body.status().with_context("json schema " + std::string(source) + " at " +
                                          (path.empty() ? "/" : path));
      Element q = jb_.b().bytes([] {
        ByteSet b;
        b.set('"');
        return b;
      }());
      return jb_.rule_of({Sequence{q, *body, q}}, source);
    }
  }
  // Several constraints on one string: the product of their languages (language_product.h).
  // Here a pattern not anchored at the end takes any suffix, as the spec's search does.
  if (!pattern.empty() && !ends_with_dollar(pattern) && !has_top_level_bar(pattern))
    positive.back().then_anything = true;
  std::vector<LanguageTerm> terms;
  bool length_met = !has_len;
  for (const std::vector<Term>* side : {&positive, &negative}) {
    for (const Term& t : *side) {
      StatusOr<Grammar> g = parse_regex(t.regex);
      if (!g.ok())
        return g.status().with_context("json schema " + std::string(t.keyword) + " at " +
                                       (path.empty() ? "/" : path));
      if (side == &positive && !t.then_anything) length_met = length_met || fits(t.regex);
      terms.push_back({std::move(*g), side == &negative, t.then_anything});
    }
  }
  if (!length_met || positive.empty()) {
    constexpr int64_t kMaxLengthTerm = 1000;  // the regex dialect's largest count
    if (min > kMaxLengthTerm || (max && *max > kMaxLengthTerm))
      return unsupported(
          s.contains("minLength") ? "minLength" : "maxLength", path,
          std::string("above ") + std::to_string(kMaxLengthTerm) + " together with " + source);
    std::string len = "(?:.|\\n){" + std::to_string(min) + "," +
                      (max ? std::to_string(*max) : std::string()) + "}";
    terms.push_back({*parse_regex(len), false, false});
  }
  StatusOr<Grammar> g = intersect_languages(terms, kMaxProductStates);
  if (!g.ok()) {
    if (g.status().code() == StatusCode::kInvalidArgument) return bad(path, g.status().message());
    return unsupported(source, path,
                       std::string("together with ") +
                           (positive.size() > 1 ? positive[0].keyword : "its other keywords") +
                           ": " + std::string(g.status().message()));
  }
  Element body = jb_.embed(*g, true, source);
  Element q = jb_.lit("\"", "q");
  return jb_.rule_of({Sequence{q, body, q}}, source);
}

}  // namespace deepinfer::grammar::json_detail

// SchemaCompiler: type dispatch and numbers (bounds, multipleOf).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "deepinfer/grammar/json_schema_compiler.h"
#include "deepinfer/grammar/json_schema_primitives.h"
#include "deepinfer/grammar/regex_parser.h"

namespace deepinfer::grammar::json_detail {

bool SchemaCompiler::unconstrained(const Json& s) {
  for (const auto& [k, v] : s.items()) {
    if (!json_detail::is_inert(k)) {
      return false;
    }
  }
  return true;
}

StatusOr<Element> SchemaCompiler::typed(const Json& s, const std::string& path, int depth) {
  if (unconstrained(s)) return jb_.any_value();
  std::set<std::string> types = type_names();
  if (s.contains("type")) {
    ASSIGN_OR_RETURN(types, json_detail::type_set(s["type"], path));
  }
  if (types.count("number")) types.erase("integer");
  Fragment alts;
  Status last_error;
  for (const std::string& t : types) {
    StatusOr<Element> e = typed_one(s, t, path, depth);
    if (!e.ok()) {
      if (e.status().message().find("accepts no value") == std::string::npos) {
        return e.status();
      }
      last_error = e.status();
      continue;
    }
    alts.push_back(Sequence{*e});
  }
  if (alts.empty()) return last_error.ok() ? bad(path, "schema accepts no value") : last_error;
  return jb_.rule_of(alts, "typed");
}

StatusOr<Element> SchemaCompiler::typed_one(const Json& s, const std::string& t,
                                            const std::string& path, int depth) {
  if (t == "null") return jb_.lit("null", "null");
  if (t == "boolean") {
    return jb_.rule_of({jb_.b().literal("true")[0], jb_.b().literal("false")[0]}, "bool");
  }
  if (t == "integer" || t == "number") return number(s, t == "integer", path);
  if (t == "string") return string(s, path);
  if (t == "array") return array(s, path, depth);
  return object(s, path, depth);
}

StatusOr<std::optional<int64_t>> SchemaCompiler::bound(const Json& s, const char* key, bool integer,
                                                       bool lower, const std::string& path,
                                                       bool* exclusive) {
  *exclusive = false;
  if (!s.contains(key)) return std::optional<int64_t>();
  const Json& v = s[key];
  if (!v.is_number()) return bad(path + "/" + key, "must be a number");
  *exclusive = std::string(key).rfind("exclusive", 0) == 0;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}) {
      return unsupported(key, path, "bound beyond 64-bit integers");
    }
    return std::optional<int64_t>(v.get<int64_t>());
  }
  double d = v.get<double>();
  if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) {
    return unsupported(key, path, "bound beyond 64-bit integers");
  }
  if (std::floor(d) == d) return std::optional<int64_t>(static_cast<int64_t>(d));
  if (!integer) return unsupported(key, path, "non-integral bounds on numbers");
  // Integers strictly or not beyond a fractional bound: the next integer inward, inclusive.
  *exclusive = false;
  return std::optional<int64_t>(static_cast<int64_t>(lower ? std::ceil(d) : std::floor(d)));
}

Element SchemaCompiler::multiples_of(int64_t k) {
  GrammarBuilder& b = jb_.b();
  std::vector<uint32_t> residue(static_cast<size_t>(k));
  for (int64_t r = 0; r < k; ++r) residue[r] = b.add_rule("mod" + std::to_string(r));
  auto digits_to = [&](int64_t r, int first_digit) {
    Fragment alts;
    std::map<int64_t, ByteSet> by_next;  // digits grouped by the residue they lead to
    for (int d = first_digit; d <= 9; ++d) by_next[(10 * r + d) % k].set('0' + d);
    for (const auto& [next, set] : by_next)
      alts.push_back(Sequence{b.bytes(set), Element{Element::Kind::kRule, residue[next]}});
    return alts;
  };
  for (int64_t r = 0; r < k; ++r) {
    Fragment alts = digits_to(r, 0);
    if (r == 0) alts.push_back(Sequence{});
    b.rule(residue[r]).alternatives = std::move(alts);
  }
  Element magnitude = jb_.rule_of(digits_to(0, 1), "multiple");
  return jb_.rule_of({Sequence{jb_.lit("0", "zero")}, Sequence{magnitude},
                      Sequence{jb_.lit("-", "minus"), magnitude}},
                     "multiples");
}

StatusOr<Element> SchemaCompiler::number(const Json& s, bool integer, const std::string& path) {
  if (s.contains("multipleOf")) {
    // Integral multipleOf up to kMaxModulus: 1 makes any number schema an integer one; k > 1
    // is a residue automaton, which does not combine with range bounds.
    constexpr int64_t kMaxModulus = 1000;
    const Json& m = s["multipleOf"];
    if (!m.is_number() || !(m.get<double>() > 0))
      return bad(path + "/multipleOf", "must be a positive number");
    const double k = m.get<double>();
    if (std::floor(k) != k || k > kMaxModulus)
      return unsupported("multipleOf", path,
                         "only integral multiples up to " + std::to_string(kMaxModulus));
    Json rest = s;
    rest.erase("multipleOf");
    if (k == 1) return number(rest, true, path);
    bool bounded = false;
    for (const char* b : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
      bounded = bounded || s.contains(b);
    if (!bounded) return multiples_of(static_cast<int64_t>(k));
    // With bounds on both sides and at most kMaxListed multiples between them: each listed.
    constexpr int64_t kMaxListed = 1000;
    const int64_t step = static_cast<int64_t>(k);
    bool lo_ex = false, hi_ex = false, lo_ex2 = false, hi_ex2 = false;
    ASSIGN_OR_RETURN(auto lo, bound(s, "minimum", true, true, path, &lo_ex));
    ASSIGN_OR_RETURN(auto hi, bound(s, "maximum", true, false, path, &hi_ex));
    ASSIGN_OR_RETURN(auto xlo, bound(s, "exclusiveMinimum", true, true, path, &lo_ex2));
    ASSIGN_OR_RETURN(auto xhi, bound(s, "exclusiveMaximum", true, false, path, &hi_ex2));
    if (xlo && (!lo || *xlo >= *lo)) lo = xlo, lo_ex = lo_ex2;
    if (xhi && (!hi || *xhi <= *hi)) hi = xhi, hi_ex = hi_ex2;
    constexpr int64_t kHuge = int64_t{1} << 50;
    if (!lo || !hi || *lo < -kHuge || *hi > kHuge)
      return unsupported("multipleOf", path, "beside a bound on one side only, or a huge one");
    const int64_t first_in = *lo + (lo_ex ? 1 : 0), last_in = *hi - (hi_ex ? 1 : 0);
    // The smallest multiple >= first_in and the largest <= last_in.
    const int64_t first =
        first_in >= 0 ? (first_in + step - 1) / step * step : -((-first_in) / step * step);
    const int64_t last =
        last_in >= 0 ? last_in / step * step : -((-last_in + step - 1) / step * step);
    if (first > last) return bad(path, "multipleOf within the bounds accepts no value");
    if ((last - first) / step + 1 > kMaxListed)
      return unsupported(
          "multipleOf", path,
          "more than " + std::to_string(kMaxListed) + " multiples within the bounds");
    std::string re;
    for (int64_t v = first; v <= last; v += step) re += (re.empty() ? "" : "|") + std::to_string(v);
    return jb_.regex(re, false, "multiples");
  }
  bool lo_ex = false, hi_ex = false, lo_ex2 = false, hi_ex2 = false;
  ASSIGN_OR_RETURN(auto lo, bound(s, "minimum", integer, true, path, &lo_ex));
  ASSIGN_OR_RETURN(auto hi, bound(s, "maximum", integer, false, path, &hi_ex));
  ASSIGN_OR_RETURN(auto xlo, bound(s, "exclusiveMinimum", integer, true, path, &lo_ex2));
  ASSIGN_OR_RETURN(auto xhi, bound(s, "exclusiveMaximum", integer, false, path, &hi_ex2));
  // The tighter of inclusive and exclusive bounds wins.
  if (xlo && (!lo || *xlo >= *lo)) lo = xlo, lo_ex = lo_ex2;
  if (xhi && (!hi || *xhi <= *hi)) hi = xhi, hi_ex = hi_ex2;
  if (!lo && !hi) return integer ? jb_.integer() : jb_.number();
  std::string re;
  if (integer) {
    if (lo && lo_ex) {
      if (*lo == INT64_MAX) return bad(path, "integer range accepts no value");
      lo = *lo + 1;
    }
    if (hi && hi_ex) {
      if (*hi == INT64_MIN) return bad(path, "integer range accepts no value");
      hi = *hi - 1;
    }
    re = json_detail::integer_range_regex(lo, hi);
  } else {
    re = json_detail::number_range_regex(lo, lo_ex, hi, hi_ex);
  }
  if (re.empty()) return bad(path, "numeric range accepts no value");
  return jb_.regex(re, false, integer ? "int_range" : "num_range");
}

StatusOr<int64_t> SchemaCompiler::count(const Json& s, const char* key, const std::string& path) {
  const Json& v = s[key];
  constexpr int64_t kHuge = int64_t{1} << 40;
  if (v.is_number_unsigned())
    return static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), kHuge));
  // Signed when the schema was built in C++ rather than parsed.
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return std::min(v.get<int64_t>(), kHuge);
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (d >= 0 && std::floor(d) == d) return d > kHuge ? kHuge : static_cast<int64_t>(d);
  }
  return bad(path + "/" + key, "must be a non-negative integer");
}

}  // namespace deepinfer::grammar::json_detail

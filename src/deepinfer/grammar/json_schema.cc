#include "deepinfer/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "deepinfer/grammar/json_schema_builder.h"
#include "deepinfer/grammar/json_schema_keywords.h"
#include "deepinfer/grammar/json_schema_merge.h"
#include "deepinfer/grammar/json_schema_primitives.h"

namespace deepinfer::grammar {
namespace {

using json_detail::JsonBuilder;
using Json = nlohmann::ordered_json;
using Fragment = GrammarBuilder::Fragment;

constexpr int kMaxDepth = 256;

const std::set<std::string>& type_names() {
  static const std::set<std::string> t = {"null",   "boolean", "integer", "number",
                                          "string", "array",   "object"};
  return t;
}

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& options)
      : root_(root),
        options_(options),
        jb_(options.max_whitespace, options.whitespace == JsonWhitespace::kFlexible) {}

  StatusOr<Grammar> compile() {
    if (root_.is_object() && root_.contains("$id") && !root_["$id"].is_string()) {
      return invalid_argument("json schema: '$id' at root must be a string");
    }
    ASSIGN_OR_RETURN(Element e, value(root_, "", 0, true));
    Grammar g = std::move(jb_).finish(e);
    RETURN_IF_ERROR(check_grammar_size(g, /*expanded=*/false, "json schema: the schema"));
    return g;
  }

 private:
  Status unsupported(const std::string& keyword, const std::string& path,
                     const std::string& why = "") {
    return unimplemented("json schema: unsupported keyword '" + keyword + "' at " +
                         (path.empty() ? "/" : path) + (why.empty() ? "" : " (" + why + ")"));
  }
  Status bad(const std::string& path, const std::string& m) {
    return invalid_argument("json schema at " + (path.empty() ? "/" : path) + ": " + m);
  }

  // The builder stops building past the size limit; the innermost schema that crossed it is
  // named.
  StatusOr<Element> value(const Json& s, const std::string& path, int depth, bool at_root) {
    ASSIGN_OR_RETURN(Element e, value_unchecked(s, path, depth, at_root));
    if (jb_.b().too_large())
      return grammar_size_error("json schema at " + (path.empty() ? "/" : path) + ": the schema",
                                false);
    return e;
  }

  StatusOr<Element> value_unchecked(const Json& s, const std::string& path, int depth,
                                    bool at_root) {
    if (depth > kMaxDepth) return bad(path, "schema nested too deeply");
    if (s.is_boolean()) {
      if (s.get<bool>()) return jb_.any_value();
      return bad(path, "schema 'false' accepts no value");
    }
    if (!s.is_object()) return bad(path, "a schema must be an object or a boolean");
    RETURN_IF_ERROR(json_detail::check_keywords(s, path, at_root));
    if (s.contains("$ref")) return ref(s, path, depth);
    if (s.contains("allOf")) {
      ASSIGN_OR_RETURN(Json merged, json_detail::merge_all_of(root_, s, path));
      return value(merged, path, depth + 1, false);
    }
    if (s.contains("anyOf") || s.contains("oneOf")) return union_of(s, path, depth);
    if (s.contains("enum") || s.contains("const")) return enumeration(s, path);
    return typed(s, path, depth);
  }

  StatusOr<Element> ref(const Json& s, const std::string& path, int depth) {
    if (!s["$ref"].is_string()) return bad(path + "/$ref", "must be a string");
    std::string target = s["$ref"].get<std::string>();
    for (const auto& [k, v] : s.items()) {
      if (k != "$ref" && !json_detail::is_annotation(k) && k != "$defs" && k != "definitions") {
        return unsupported(k, path, "next to $ref");
      }
    }
    auto it = ref_rules_.find(target);
    if (it != ref_rules_.end()) return Element{Element::Kind::kRule, it->second};
    ASSIGN_OR_RETURN(const Json* t, json_detail::resolve_ref(root_, target, path));
    // The rule exists before its body is compiled, so recursive references terminate.
    uint32_t r = jb_.b().add_rule("ref" + target);
    ref_rules_.emplace(target, r);
    std::string target_path = target.substr(1);
    ASSIGN_OR_RETURN(Element body, value(*t, target_path, depth + 1, target_path.empty()));
    jb_.b().rule(r).alternatives = {Sequence{body}};
    return Element{Element::Kind::kRule, r};
  }

  StatusOr<Element> union_of(const Json& s, const std::string& path, int depth) {
    bool one = s.contains("oneOf");
    if (one && s.contains("anyOf")) return unsupported("oneOf", path, "together with anyOf");
    const char* key = one ? "oneOf" : "anyOf";
    const Json& branches = s[key];
    if (!branches.is_array() || branches.empty()) {
      return bad(path + "/" + key, "must be a non-empty array");
    }
    // Sibling keywords apply to every branch: S and (A or B) = (S and A) or (S and B).
    Json siblings = s;
    siblings.erase(key);
    bool plain = true;  // only annotations beside the union: keep branches (and their $refs)
    for (const auto& [k, v] : siblings.items()) {
      if (!json_detail::is_annotation(k) && k != "$defs" && k != "definitions") plain = false;
    }
    std::vector<Json> merged;
    for (size_t i = 0; i < branches.size(); ++i) {
      if (plain) {
        merged.push_back(branches[i]);
        continue;
      }
      std::string bpath = path + "/" + key + "/" + std::to_string(i);
      Json both = Json::object();
      both["allOf"] = Json::array({siblings, branches[i]});
      ASSIGN_OR_RETURN(Json m, json_detail::merge_all_of(root_, both, bpath));
      merged.push_back(std::move(m));
    }
    if (one) {
      for (size_t i = 0; i < merged.size(); ++i) {
        for (size_t j = i + 1; j < merged.size(); ++j) {
          if (!json_detail::provably_disjoint(root_, merged[i], merged[j], options_.strict)) {
            return unsupported("oneOf", path,
                               "branches " + std::to_string(i) + " and " + std::to_string(j) +
                                   " may overlap, so exclusivity cannot be enforced; use anyOf");
          }
        }
      }
    }
    Fragment alts;
    Status last_error;
    for (size_t i = 0; i < merged.size(); ++i) {
      std::string bpath = path + "/" + key + "/" + std::to_string(i);
      auto e = value(merged[i], bpath, depth + 1, false);
      if (!e.ok()) {
        // An unsatisfiable branch only drops out; anything else is an error.
        if (e.status().code() != StatusCode::kInvalidArgument ||
            e.status().message().find("accepts no value") == std::string::npos) {
          return e.status();
        }
        last_error = e.status();
        continue;
      }
      alts.push_back(Sequence{*e});
    }
    if (alts.empty()) return last_error;
    return jb_.rule_of(alts, key);
  }

  StatusOr<Element> enumeration(const Json& s, const std::string& path) {
    for (const auto& [k, v] : s.items()) {
      if (k != "enum" && k != "const" && k != "type" && !json_detail::is_annotation(k) &&
          k != "$defs" && k != "definitions") {
        return unsupported(k, path, "next to enum/const");
      }
    }
    std::vector<Json> values;
    if (s.contains("const")) values.push_back(s["const"]);
    if (s.contains("enum")) {
      if (!s["enum"].is_array()) return bad(path + "/enum", "must be an array");
      for (const Json& v : s["enum"]) {
        if (!s.contains("const") || v == s["const"]) values.push_back(v);
      }
      if (s.contains("const")) values.resize(values.size() > 1 ? 1 : 0);
    }
    std::set<std::string> types;
    if (s.contains("type")) {
      ASSIGN_OR_RETURN(types, json_detail::type_set(s["type"], path));
    }
    Fragment alts;
    std::set<std::string> seen;
    for (const Json& v : values) {
      if (!types.empty() && !json_detail::value_has_type(v, types)) continue;
      std::string text = v.dump(-1, ' ', false, Json::error_handler_t::strict);
      if (!seen.insert(text).second) continue;
      alts.push_back(Sequence{literal_value(v)});
    }
    if (alts.empty()) return bad(path, "enum/const accepts no value");
    return jb_.rule_of(alts, "enum");
  }

  // A fixed JSON value: scalars in canonical form (minimal escapes, raw UTF-8, nlohmann's
  // number text); arrays and objects with the usual whitespace gaps, members in stored order.
  Element literal_value(const Json& v) {
    if (!v.is_array() && !v.is_object()) {
      return jb_.lit(v.dump(-1, ' ', false, Json::error_handler_t::strict), "const");
    }
    bool obj = v.is_object();
    Element open = jb_.lit(obj ? "{" : "[", "o"), close = jb_.lit(obj ? "}" : "]", "c");
    if (v.empty()) return jb_.rule_of({Sequence{open, jb_.ws(), close}}, "const");
    Element comma = jb_.rule_of({Sequence{jb_.ws(), jb_.lit(",", "c"), jb_.ws()}}, "comma");
    Element colon = jb_.rule_of({Sequence{jb_.ws(), jb_.lit(":", "c"), jb_.ws()}}, "colon");
    Sequence seq = {open, jb_.ws()};
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      if (!first) seq.push_back(comma);
      first = false;
      if (obj) {
        seq.push_back(jb_.lit(Json(k).dump(-1, ' ', false, Json::error_handler_t::strict), "key"));
        seq.push_back(colon);
      }
      seq.push_back(literal_value(x));
    }
    seq.push_back(jb_.ws());
    seq.push_back(close);
    return jb_.rule_of({seq}, "const");
  }

  // Only annotations (or nothing): every value is valid.
  static bool unconstrained(const Json& s) {
    for (const auto& [k, v] : s.items()) {
      if (!json_detail::is_annotation(k) && k != "$defs" && k != "definitions" && k != "$id") {
        return false;
      }
    }
    return true;
  }

  StatusOr<Element> typed(const Json& s, const std::string& path, int depth) {
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

  StatusOr<Element> typed_one(const Json& s, const std::string& t, const std::string& path,
                              int depth) {
    if (t == "null") return jb_.lit("null", "null");
    if (t == "boolean") {
      return jb_.rule_of({jb_.b().literal("true")[0], jb_.b().literal("false")[0]}, "bool");
    }
    if (t == "integer" || t == "number") return number(s, t == "integer", path);
    if (t == "string") return string(s, path);
    if (t == "array") return array(s, path, depth);
    return object(s, path, depth);
  }

  // A numeric keyword as an integral int64 bound, rounded toward the allowed side for integer
  // schemas; error when it is not representable.
  StatusOr<std::optional<int64_t>> bound(const Json& s, const char* key, bool integer, bool lower,
                                         const std::string& path, bool* exclusive) {
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

  // Integers that are multiples of k: "0", or -?[1-9][0-9]* tracked digit by digit through the k
  // residues (rule r: the digits so far are r mod k), ending only at residue 0.
  Element multiples_of(int64_t k) {
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

  StatusOr<Element> number(const Json& s, bool integer, const std::string& path) {
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
      for (const char* b : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
        if (s.contains(b))
          return unsupported("multipleOf", path, std::string("together with ") + b);
      return multiples_of(static_cast<int64_t>(k));
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

  // A non-negative count keyword; huge values are clamped (no output gets that long).
  StatusOr<int64_t> count(const Json& s, const char* key, const std::string& path) {
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

  StatusOr<Element> string(const Json& s, const std::string& path) {
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
    std::string re;
    const char* source = nullptr;
    if (s.contains("format")) {
      if (!s["format"].is_string()) return bad(path + "/format", "must be a string");
      std::string f = s["format"].get<std::string>();
      auto r = json_detail::format_regex(f);
      if (!r) return unsupported("format", path, "format '" + f + "' is not supported");
      re = *r;
      source = "format";
    }
    if (s.contains("pattern")) {
      if (source) return unsupported("pattern", path, "together with format");
      if (!s["pattern"].is_string()) return bad(path + "/pattern", "must be a string");
      re = s["pattern"].get<std::string>();
      source = "pattern";
    }
    if (!source) return jb_.string(min, max);
    if (has_len) {
      return unsupported(s.contains("minLength") ? "minLength" : "maxLength", path,
                         std::string("together with ") + source);
    }
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

  StatusOr<Element> array(const Json& s, const std::string& path, int depth) {
    if (s.contains("uniqueItems") && s["uniqueItems"] == true &&
        !(s.contains("maxItems") && s["maxItems"].is_number() &&
          s["maxItems"].get<double>() <= 1)) {
      return unsupported("uniqueItems", path, "true is not enforceable");
    }
    int64_t min = 0;
    std::optional<int64_t> max;
    if (s.contains("minItems")) {
      ASSIGN_OR_RETURN(min, count(s, "minItems", path));
    }
    if (s.contains("maxItems")) {
      ASSIGN_OR_RETURN(max, count(s, "maxItems", path));
    }
    if (max && *max < min) return bad(path, "item count range accepts no value");
    std::vector<Element> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) return bad(path + "/prefixItems", "must be an array");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
        std::string p = path + "/prefixItems/" + std::to_string(i);
        auto e = value(s["prefixItems"][i], p, depth + 1, false);
        if (!e.ok()) {
          if (e.status().message().find("accepts no value") == std::string::npos) return e.status();
          // The array can stop before an impossible position.
          if (min > static_cast<int64_t>(i)) return e.status();
          max = max ? std::min<int64_t>(*max, i) : static_cast<int64_t>(i);
          break;
        }
        prefix.push_back(*e);
      }
    }
    // Items after the prefix: a schema, or none (items false, or strict tuple).
    std::optional<Element> rest;
    bool rest_allowed = true;
    if (s.contains("items")) {
      const Json& it = s["items"];
      if (it.is_boolean() && !it.get<bool>()) {
        rest_allowed = false;
      } else {
        auto e = value(it, path + "/items", depth + 1, false);
        if (!e.ok()) {
          if (e.status().message().find("accepts no value") == std::string::npos) return e.status();
          rest_allowed = false;
        } else {
          rest = *e;
        }
      }
    } else if (!prefix.empty() && options_.strict) {
      rest_allowed = false;
    } else {
      rest = jb_.any_value();
    }
    int64_t k = static_cast<int64_t>(prefix.size());
    if (!rest_allowed) max = max ? std::min<int64_t>(*max, k) : k;
    if (max && *max < min) return bad(path, "array accepts no value");
    Element comma = jb_.rule_of({Sequence{jb_.ws(), jb_.lit(",", "c"), jb_.ws()}}, "comma");
    // tail(i): the items from position i on, given that position i-1 is present.
    std::optional<Element> tail;  // nullopt = nothing more
    if (rest_allowed && (!max || *max > k)) {
      Element item = jb_.rule_of({Sequence{comma, *rest}}, "item");
      int64_t need = std::max<int64_t>(0, min - k);
      std::optional<int64_t> most = max ? std::optional<int64_t>(*max - k) : std::nullopt;
      tail = jb_.repeat(item, need, most, "items");
    }
    // Walk the prefix backwards: tail(i) = "," p_i tail(i+1), optional when i >= min.
    for (int64_t i = k - 1; i >= 1; --i) {
      if (max && i >= *max) continue;
      Sequence seq = {comma, prefix[i]};
      if (tail) seq.push_back(*tail);
      Fragment alts = {seq};
      if (i >= min) alts.push_back(Sequence{});
      tail = jb_.rule_of(alts, "tuple");
    }
    Element first = k > 0 ? prefix[0] : (rest ? *rest : jb_.any_value());
    // With no prefix, "first" is the first rest item, and the rest repeat accounts for it.
    std::optional<Element> body;
    if (k > 0) {
      if (!max || *max >= 1) {
        Sequence seq = {first};
        if (tail) seq.push_back(*tail);
        body = jb_.rule_of({seq}, "elems");
      }
    } else if (rest_allowed && (!max || *max >= 1)) {
      Element item = jb_.rule_of({Sequence{comma, *rest}}, "item");
      int64_t need = std::max<int64_t>(0, min - 1);
      std::optional<int64_t> most = max ? std::optional<int64_t>(*max - 1) : std::nullopt;
      body = jb_.rule_of({Sequence{*rest, jb_.repeat(item, need, most, "items")}}, "elems");
    }
    Element open = jb_.lit("[", "o"), close = jb_.lit("]", "c");
    Fragment alts;
    if (min == 0) alts.push_back(Sequence{open, jb_.ws(), close});
    if (body) alts.push_back(Sequence{open, jb_.ws(), *body, jb_.ws(), close});
    if (alts.empty()) return bad(path, "array accepts no value");
    return jb_.rule_of(alts, "array");
  }

  StatusOr<Element> object(const Json& s, const std::string& path, int depth);

  const Json& root_;
  JsonSchemaOptions options_;
  JsonBuilder jb_;
  std::map<std::string, uint32_t> ref_rules_;
};

StatusOr<Element> SchemaCompiler::object(const Json& s, const std::string& path, int depth) {
  struct Prop {
    std::string name;
    bool required;
    Element value;
  };
  std::set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) return bad(path + "/required", "must be an array");
    for (const Json& r : s["required"]) {
      if (!r.is_string()) return bad(path + "/required", "must hold strings");
      required.insert(r.get<std::string>());
    }
  }
  // dependentRequired (and draft 4-7 `dependencies` with arrays): "A present => D present". A
  // required A makes D required (to a fixpoint); an optional A whose dependents are not all
  // required is never written. Sound, not complete: documented in README.md.
  std::map<std::string, std::vector<std::string>> depends;
  for (const char* key : {"dependentRequired", "dependencies"}) {
    if (!s.contains(key)) continue;
    if (!s[key].is_object()) return bad(path + "/" + key, "must be an object");
    for (const auto& [name, deps] : s[key].items()) {
      if (!deps.is_array()) return unsupported(key, path, "schema dependencies ('" + name + "')");
      for (const Json& d : deps) {
        if (!d.is_string()) return bad(path + "/" + key + "/" + name, "must hold strings");
        depends[name].push_back(d.get<std::string>());
      }
    }
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [name, deps] : depends)
      if (required.count(name))
        for (const std::string& d : deps) grew |= required.insert(d).second;
  }
  std::set<std::string> never;  // optional names whose dependents may be missing
  for (const auto& [name, deps] : depends)
    if (!required.count(name))
      for (const std::string& d : deps)
        if (!required.count(d)) never.insert(name);
  // patternProperties: a listed name that a pattern matches takes that schema too; an
  // additional member takes every pattern's schema besides additionalProperties (whatever its
  // name matches, it then validates: sound, not complete).
  std::vector<std::pair<std::regex, Json>> patterns;
  if (s.contains("patternProperties")) {
    if (!s["patternProperties"].is_object())
      return bad(path + "/patternProperties", "must be an object");
    for (const auto& [p, sub] : s["patternProperties"].items()) {
      try {
        patterns.emplace_back(std::regex(p, std::regex::ECMAScript), sub);
      } catch (const std::regex_error&) {
        return unsupported("patternProperties", path, "pattern '" + p + "' is not supported");
      }
    }
  }
  auto with_patterns = [&](Json base, const std::string* name) {
    Json all = Json::array({std::move(base)});
    for (const auto& [re, sub] : patterns)
      if (name == nullptr || std::regex_search(*name, re)) all.push_back(sub);
    return all.size() == 1 ? all[0] : Json{{"allOf", all}};
  };
  // Extra members: additionalProperties, or the strict/lax default.
  std::optional<Element> extra;
  bool extra_explicit_false = false;
  if (s.contains("additionalProperties")) {
    const Json& ap = s["additionalProperties"];
    if (ap.is_boolean() && !ap.get<bool>()) {
      extra_explicit_false = true;
    } else {
      auto e = value(with_patterns(ap, nullptr), path + "/additionalProperties", depth + 1, false);
      if (!e.ok()) {
        if (e.status().message().find("accepts no value") == std::string::npos) return e.status();
        extra_explicit_false = true;
      } else {
        extra = *e;
      }
    }
  } else if (!options_.strict || !s.contains("properties")) {
    // Strict mode closes objects that list properties; one without any stays open.
    if (patterns.empty()) {
      extra = jb_.any_value();
    } else {
      auto e =
          value(with_patterns(Json(true), nullptr), path + "/patternProperties", depth + 1, false);
      if (!e.ok() && e.status().message().find("accepts no value") == std::string::npos)
        return e.status();
      if (e.ok()) extra = *e;
    }
  }
  std::vector<Prop> props;
  std::vector<std::string> names;
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) return bad(path + "/properties", "must be an object");
    for (const auto& [name, sub] : s["properties"].items()) {
      names.push_back(name);
      if (never.count(name)) continue;
      std::string p = path + "/properties/" + json_detail::pointer_escape(name);
      auto e = value(with_patterns(sub, &name), p, depth + 1, false);
      if (!e.ok()) {
        if (e.status().message().find("accepts no value") == std::string::npos) return e.status();
        if (required.count(name)) return e.status();
        continue;  // an impossible optional property is simply never emitted
      }
      props.push_back({name, required.count(name) > 0, *e});
    }
  }
  for (const std::string& name : never)  // nor as an additional member
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  // Required names without a property schema take the additionalProperties schema (in the
  // order `required` gives them, then those that dependencies made required).
  std::vector<std::string> required_order;
  if (s.contains("required"))
    for (const Json& r : s["required"]) required_order.push_back(r.get<std::string>());
  for (const std::string& r : required)
    if (std::find(required_order.begin(), required_order.end(), r) == required_order.end())
      required_order.push_back(r);
  {
    for (const std::string& name : required_order) {
      if (std::find(names.begin(), names.end(), name) != names.end()) continue;
      if (extra_explicit_false) {
        return bad(path, "required property '" + name + "' is forbidden by additionalProperties");
      }
      names.push_back(name);
      if (extra || patterns.empty()) {
        props.push_back({name, true, extra ? *extra : jb_.any_value()});
        continue;
      }
      ASSIGN_OR_RETURN(
          Element e, value(with_patterns(Json(true), &name), path + "/required", depth + 1, false));
      props.push_back({name, true, e});
    }
  }
  size_t n_required = 0;
  for (const Prop& p : props) n_required += p.required;
  if (s.contains("minProperties")) {
    ASSIGN_OR_RETURN(int64_t m, count(s, "minProperties", path));
    if (m > static_cast<int64_t>(n_required)) {
      return unsupported("minProperties", path,
                         "only values up to the number of required properties");
    }
  }
  if (s.contains("maxProperties")) {
    ASSIGN_OR_RETURN(int64_t m, count(s, "maxProperties", path));
    if (extra || m < static_cast<int64_t>(props.size())) {
      return unsupported("maxProperties", path,
                         "only values at least the number of properties, with no additional ones");
    }
  }
  Element comma = jb_.rule_of({Sequence{jb_.ws(), jb_.lit(",", "c"), jb_.ws()}}, "comma");
  Element colon = jb_.rule_of({Sequence{jb_.ws(), jb_.lit(":", "c"), jb_.ws()}}, "colon");
  std::vector<Element> members;
  for (const Prop& p : props) {
    std::string key = Json(p.name).dump(-1, ' ', false, Json::error_handler_t::strict);
    members.push_back(jb_.rule_of({Sequence{jb_.lit(key, "key"), colon, p.value}}, "member"));
  }
  std::optional<Element> extra_member;
  if (extra) {
    extra_member = jb_.rule_of({Sequence{jb_.string_not_in(names), colon, *extra}}, "extra");
  }
  // after[i]: members i.. given one was already written; nonempty[i]: members i.., at least one.
  size_t n = props.size();
  std::vector<std::optional<Element>> after(n + 1), nonempty(n + 1);
  if (extra_member) {
    after[n] =
        jb_.b().as_element(jb_.b().star({Sequence{comma, *extra_member}}, "extras"), "extras");
    nonempty[n] = jb_.rule_of({Sequence{*extra_member, *after[n]}}, "extras1");
  }
  for (size_t i = n; i-- > 0;) {
    Sequence with = {comma, members[i]};
    if (after[i + 1]) with.push_back(*after[i + 1]);
    Fragment a = {with};
    if (!props[i].required) a.push_back(after[i + 1] ? Sequence{*after[i + 1]} : Sequence{});
    after[i] = jb_.rule_of(a, "after");
    Sequence first = {members[i]};
    if (after[i + 1]) first.push_back(*after[i + 1]);
    Fragment ne = {first};
    if (!props[i].required && nonempty[i + 1]) ne.push_back(Sequence{*nonempty[i + 1]});
    nonempty[i] = jb_.rule_of(ne, "members");
  }
  Element open = jb_.lit("{", "o"), close = jb_.lit("}", "c");
  Fragment alts;
  if (n_required == 0) alts.push_back(Sequence{open, jb_.ws(), close});
  if (nonempty[0]) alts.push_back(Sequence{open, jb_.ws(), *nonempty[0], jb_.ws(), close});
  return jb_.rule_of(alts, "object");
}

}  // namespace

StatusOr<Grammar> compile_json_schema(const nlohmann::ordered_json& schema,
                                      const JsonSchemaOptions& options) {
  if (options.max_whitespace < 0 || options.max_whitespace > 1024) {
    return invalid_argument("json schema: max_whitespace must be in [0, 1024]");
  }
  // nlohmann throws (e.g. on strings that are not UTF-8); exceptions stay inside the module.
  try {
    const nlohmann::ordered_json keywords_only = json_detail::strip_non_keywords(schema);
    SchemaCompiler c(keywords_only, options);
    StatusOr<Grammar> g = c.compile();
    if (g.ok() || g.status().code() != StatusCode::kUnimplemented) return g;
    // Name every unsupported keyword of the document, not just the first one met.
    std::vector<std::string> all;
    json_detail::for_each_schema(
        keywords_only, [&](const nlohmann::ordered_json& s, const std::string& path) {
          for (const std::string& k : json_detail::unsupported_keywords(s, path.empty()))
            all.push_back("'" + k + "' at " + (path.empty() ? "/" : path));
        });
    std::string message = g.status().message();
    if (all.size() > 1 || (all.size() == 1 && message.find(all[0]) == std::string::npos)) {
      message += "; every unsupported keyword in the schema:";
      for (size_t i = 0; i < all.size(); ++i) message += (i ? ", " : " ") + all[i];
    }
    return unimplemented(message);
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(std::string("json schema: ") + e.what());
  }
}

StatusOr<Grammar> compile_json_schema(const nlohmann::json& schema,
                                      const JsonSchemaOptions& options) {
  try {
    return compile_json_schema(nlohmann::ordered_json::parse(schema.dump()), options);
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(std::string("json schema: ") + e.what());
  }
}

StatusOr<Grammar> compile_json_schema_text(std::string_view schema_text,
                                           const JsonSchemaOptions& options) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(schema_text, nullptr, false);
  if (j.is_discarded()) return invalid_argument("json schema: the schema is not valid JSON");
  return compile_json_schema(j, options);
}

Grammar json_object_grammar(const JsonSchemaOptions& options) {
  JsonBuilder jb(options.max_whitespace, options.whitespace == JsonWhitespace::kFlexible);
  Element o = jb.any_object();
  return std::move(jb).finish(o);
}

Grammar json_value_grammar(const JsonSchemaOptions& options) {
  JsonBuilder jb(options.max_whitespace, options.whitespace == JsonWhitespace::kFlexible);
  Element v = jb.any_value();
  return std::move(jb).finish(v);
}

}  // namespace deepinfer::grammar

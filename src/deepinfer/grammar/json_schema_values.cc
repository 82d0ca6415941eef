// SchemaCompiler: enum/const values, the keywords checked beside them, finite value sets.
#include <algorithm>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "deepinfer/grammar/json_schema_compiler.h"

namespace deepinfer::grammar::json_detail {

std::optional<bool> SchemaCompiler::keyword_holds(const Json& v, const std::string& k,
                                                  const Json& s) {
  static const std::set<std::string> object_kw = {"properties",           "required",
                                                  "additionalProperties", "patternProperties",
                                                  "minProperties",        "maxProperties",
                                                  "dependentRequired",    "dependencies",
                                                  "propertyNames",        "unevaluatedProperties",
                                                  "dependentSchemas"};
  static const std::set<std::string> array_kw = {
      "items",       "prefixItems", "additionalItems", "minItems",    "maxItems",
      "uniqueItems", "contains",    "minContains",     "maxContains", "unevaluatedItems"};
  static const std::set<std::string> string_kw = {"minLength", "maxLength", "pattern", "format"};
  static const std::set<std::string> number_kw = {"minimum", "maximum", "exclusiveMinimum",
                                                  "exclusiveMaximum", "multipleOf"};
  const Json& x = s[k];
  if (object_kw.count(k)) {
    if (!v.is_object()) return true;
    if (k == "required" && x.is_array()) {
      for (const Json& r : x)
        if (!r.is_string() || !v.contains(r.get<std::string>())) return false;
      return true;
    }
    return std::nullopt;
  }
  if (array_kw.count(k)) {
    if (!v.is_array()) return true;
    if ((k == "minItems" || k == "maxItems") && x.is_number()) {
      const double n = static_cast<double>(v.size());
      return k == "minItems" ? n >= x.get<double>() : n <= x.get<double>();
    }
    return std::nullopt;
  }
  if (string_kw.count(k)) {
    if (!v.is_string()) return true;
    if ((k == "minLength" || k == "maxLength") && x.is_number()) {
      double n = 0;
      for (unsigned char c : v.get<std::string>()) n += (c & 0xC0) != 0x80;
      return k == "minLength" ? n >= x.get<double>() : n <= x.get<double>();
    }
    if (k == "pattern" && x.is_string()) return pattern_finds(x.get<std::string>(), v);
    return std::nullopt;
  }
  if (number_kw.count(k)) {
    if (!v.is_number()) return true;
    if (!x.is_number() || k == "multipleOf") return std::nullopt;
    const double a = v.get<double>(), b = x.get<double>();
    if (k == "minimum") return a >= b;
    if (k == "maximum") return a <= b;
    if (k == "exclusiveMinimum") return a > b;
    return a < b;
  }
  return std::nullopt;
}

std::optional<bool> SchemaCompiler::pattern_finds(const std::string& p, const Json& v) {
  return json_detail::ascii_pattern_finds(p, v.get<std::string>());
}

StatusOr<Element> SchemaCompiler::enumeration(const Json& s, const std::string& path) {
  std::vector<std::string> others;  // keywords the values must also satisfy
  for (const auto& [k, v] : s.items()) {
    if (k != "enum" && k != "const" && k != "type" && !json_detail::is_inert(k))
      others.push_back(k);
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
  std::vector<std::string> scalars;  // canonical texts, one trie (GrammarBuilder::literals)
  std::set<std::string> seen;
  for (const Json& v : values) {
    if (!types.empty() && !json_detail::value_has_type(v, types)) continue;
    bool holds = true;
    for (const std::string& k : others) {
      std::optional<bool> h = keyword_holds(v, k, s);
      if (!h) return unsupported(k, path, "next to enum/const");
      holds = holds && *h;
    }
    if (!holds) continue;
    std::string text = v.dump(-1, ' ', false, Json::error_handler_t::strict);
    if (!seen.insert(text).second) continue;
    if (v.is_array() || v.is_object()) {
      alts.push_back(Sequence{literal_value(v)});  // whitespace gaps: not one literal
    } else {
      scalars.push_back(std::move(text));
    }
  }
  const Fragment trie = jb_.b().literals(std::move(scalars), "enum");
  alts.insert(alts.end(), trie.begin(), trie.end());
  if (alts.empty()) return bad(path, "enum/const accepts no value");
  return jb_.rule_of(alts, "enum");
}

Element SchemaCompiler::literal_value(const Json& v) {
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

std::optional<std::vector<Json>> SchemaCompiler::finite_values(const Json& s0) {
  const Json* s = &s0;
  for (int i = 0; i < 32 && s->is_object() && s->contains("$ref"); ++i) {
    for (const auto& [k, v] : s->items())
      if (k != "$ref" && !json_detail::is_inert(k)) return std::nullopt;
    if (!(*s)["$ref"].is_string()) return std::nullopt;
    auto t = json_detail::resolve_ref(root_, (*s)["$ref"].get<std::string>(), "");
    if (!t.ok()) return std::nullopt;
    s = *t;
  }
  if (!s->is_object()) return std::nullopt;
  std::set<std::string> types = type_names();
  for (const auto& [k, v] : s->items()) {
    if (k == "type") {
      auto t = json_detail::type_set(v, "");
      if (!t.ok()) return std::nullopt;
      types = *t;
    } else if (k != "enum" && k != "const" && !json_detail::is_inert(k)) {
      return std::nullopt;
    }
  }
  std::vector<Json> cand;
  if (s->contains("const")) {
    cand.push_back((*s)["const"]);
    if (s->contains("enum") &&
        (!(*s)["enum"].is_array() || json_detail::values_disjoint({(*s)["const"]}, (*s)["enum"])))
      return std::vector<Json>{};
  } else if (s->contains("enum")) {
    if (!(*s)["enum"].is_array()) return std::nullopt;
    cand.assign((*s)["enum"].begin(), (*s)["enum"].end());
  } else if (types == std::set<std::string>{"boolean"}) {
    cand = {Json(true), Json(false)};
  } else if (types == std::set<std::string>{"null"}) {
    cand = {Json(nullptr)};
  } else {
    return std::nullopt;
  }
  std::vector<Json> out;
  for (const Json& v : cand)
    if (json_detail::value_has_type(v, types) && json_detail::values_disjoint(out, {v}))
      out.push_back(v);
  return out;
}

}  // namespace deepinfer::grammar::json_detail

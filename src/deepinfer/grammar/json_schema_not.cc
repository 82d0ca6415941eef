// SchemaCompiler: `not`, as a narrowing of the schema beside it.
#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "deepinfer/grammar/json_schema_compiler.h"

namespace deepinfer::grammar::json_detail {
namespace {

// The pattern that matches exactly the string s (each ASCII punctuation character escaped,
// the rest literal), for excluding s as a `not: {pattern}` does.
std::string not_literal_pattern(const std::string& s) {
  std::string out = "^";
  for (unsigned char c : s) {
    if (c < 0x80 && !std::isalnum(c) && c != ' ' && c >= 0x20) out += '\\';
    if (c < 0x20) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      continue;
    }
    out += static_cast<char>(c);
  }
  return out + "$";
}

}  // namespace

Status SchemaCompiler::negate_into(Json* out, const Json& n0, const std::string& path, int depth) {
  // allOf merges n `not`s into n-1 nested anyOfs (json_schema_merge.cc).
  if (depth > 64) return unsupported("not", path, "nested too deeply");
  const Json* n = &n0;
  if (n->is_object() && n->contains("$ref") && (*n)["$ref"].is_string()) {
    ASSIGN_OR_RETURN(n, json_detail::resolve_ref(root_, (*n)["$ref"].get<std::string>(), path));
  }
  if (n->is_boolean()) {
    if (n->get<bool>()) return bad(path, "'not: true' accepts no value");
    return ok_status();
  }
  if (!n->is_object()) return bad(path, "a schema must be an object or a boolean");
  std::set<std::string> keys;
  auto trivially_true = [](const Json& x) {
    return x == true ||
           (x.is_object() && std::all_of(x.items().begin(), x.items().end(), [](const auto& kv) {
              return json_detail::is_inert(kv.key());
            }));
  };
  for (const auto& [k, v] : n->items()) {
    if (json_detail::is_inert(k)) continue;
    // Parts of n that every value satisfies change nothing: `properties` of true schemas,
    // `additionalProperties: true`, and `type: object` beside `required` (whose negation
    // already asks for an object).
    if (k == "properties" && v.is_object() &&
        std::all_of(v.items().begin(), v.items().end(),
                    [&](const auto& kv) { return trivially_true(kv.value()); }))
      continue;
    if (k == "additionalProperties" && trivially_true(v)) continue;
    if (k == "type" && v == "object" && n->contains("required")) continue;
    keys.insert(k);
  }
  auto types_of_out = [&]() -> StatusOr<std::set<std::string>> {
    if (!out->contains("type")) return type_names();
    return json_detail::type_set((*out)["type"], path);
  };
  auto set_types = [&](const std::set<std::string>& t) -> Status {
    if (t.empty()) return bad(path, "'not' leaves no type: accepts no value");
    Json arr = Json::array();
    for (const std::string& x : t) arr.push_back(x);
    (*out)["type"] = arr;
    return ok_status();
  };
  if (keys.empty()) return bad(path, "'not: {}' accepts no value");
  if (keys == std::set<std::string>{"type"}) {
    ASSIGN_OR_RETURN(auto drop, json_detail::type_set((*n)["type"], path));
    ASSIGN_OR_RETURN(auto have, types_of_out());
    if (drop.count("number")) drop.insert("integer");
    if (drop.count("integer") && !drop.count("number") && have.count("number"))
      return unsupported("not", path, "not integer beside number");
    for (const std::string& t : drop) have.erase(t);
    return set_types(have);
  }
  if (keys == std::set<std::string>{"required"} && (*n)["required"].is_array()) {
    std::set<std::string> required;
    if (out->contains("required") && (*out)["required"].is_array())
      for (const Json& r : (*out)["required"])
        if (r.is_string()) required.insert(r.get<std::string>());
    for (const Json& r : (*n)["required"]) {
      if (!r.is_string() || required.count(r.get<std::string>())) continue;
      ASSIGN_OR_RETURN(auto have, types_of_out());
      if (!have.count("object")) return bad(path, "'not required' accepts no value");
      RETURN_IF_ERROR(set_types({"object"}));  // 'required' holds for every non-object
      if (!out->contains("properties") || !(*out)["properties"].is_object())
        (*out)["properties"] = Json::object();
      (*out)["properties"][r.get<std::string>()] = false;
      return ok_status();
    }
    return bad(path, "'not required' accepts no value: every name is required");
  }
  if (keys == std::set<std::string>{"pattern"} && (*n)["pattern"].is_string()) {
    // {pattern: P} holds for every value but strings P finds no match in: only such strings
    // remain. Beside enum/const the values are checked (where std::regex is certain);
    // otherwise the string compiler excludes P's matches (kNotPatternKey).
    const std::string p = (*n)["pattern"].get<std::string>();
    if (out->contains("enum") && out->contains("const"))
      return unsupported("not", path, "pattern beside both enum and const");
    if (out->contains("enum") || out->contains("const")) {
      std::vector<Json> vals;
      if (out->contains("const")) vals.push_back((*out)["const"]);
      if (out->contains("enum") && (*out)["enum"].is_array())
        vals.insert(vals.end(), (*out)["enum"].begin(), (*out)["enum"].end());
      Json keep = Json::array();
      for (const Json& v : vals) {
        if (!v.is_string()) continue;
        std::optional<bool> found = pattern_finds(p, v);
        if (!found) return unsupported("not", path, "pattern beside values it cannot check");
        if (!*found) keep.push_back(v);
      }
      out->erase("const");
      (*out)["enum"] = keep;
      return ok_status();
    }
    ASSIGN_OR_RETURN(auto have, types_of_out());
    if (!have.count("string")) return bad(path, "'not pattern' leaves no type: accepts no value");
    Json list = out->contains(kNotPatternKey) ? (*out)[kNotPatternKey] : Json::array();
    list.push_back(p);
    (*out)[kNotPatternKey] = list;
    return set_types({"string"});
  }
  if (keys.count("required") && keys.size() > 1 && (*n)["required"].is_array()) {
    // not (R and P) holds wherever not R does: the value is made to lack a required name
    // (sound, not complete: values that fail only P are not written).
    return negate_into(out, Json{{"required", (*n)["required"]}}, path, depth + 1);
  }
  if (keys == std::set<std::string>{"anyOf"} && (*n)["anyOf"].is_array()) {
    for (const Json& b : (*n)["anyOf"]) RETURN_IF_ERROR(negate_into(out, b, path, depth + 1));
    return ok_status();
  }
  if ((keys == std::set<std::string>{"enum"} || keys == std::set<std::string>{"const"}) &&
      !out->contains("enum") && !out->contains("const")) {
    // Strings struck from a plain string schema (json_detail::kNotInKey); beside a pattern,
    // format or length each string is excluded as the pattern ^s$ (not_literal_pattern).
    ASSIGN_OR_RETURN(auto have, types_of_out());
    std::vector<Json> drop;
    if (n->contains("const")) drop.push_back((*n)["const"]);
    if (n->contains("enum") && (*n)["enum"].is_array())
      for (const Json& v : (*n)["enum"]) drop.push_back(v);
    bool shaped = false;
    for (const char* k : {"pattern", "format", "minLength", "maxLength", kNotPatternKey})
      shaped = shaped || out->contains(k);
    if (shaped) {
      Json list = out->contains(kNotPatternKey) ? (*out)[kNotPatternKey] : Json::array();
      for (const Json& v : drop) {
        if (v.is_string()) {
          list.push_back(not_literal_pattern(v.get<std::string>()));
        } else if (json_detail::value_has_type(v, have)) {
          return unsupported("not", path, "enum/const of values other than strings");
        }
      }
      (*out)[kNotPatternKey] = list;
      return set_types(have);
    }
    Json list =
        out->contains(json_detail::kNotInKey) ? (*out)[json_detail::kNotInKey] : Json::array();
    for (const Json& v : drop) {
      if (v.is_string()) {
        list.push_back(v);
      } else if (json_detail::value_has_type(v, have)) {
        return unsupported("not", path, "enum/const of values other than strings");
      }
    }
    (*out)[json_detail::kNotInKey] = list;
    return set_types(have);  // explicit, so the marker is seen (typed, not unconstrained)
  }
  if ((keys == std::set<std::string>{"enum"} || keys == std::set<std::string>{"const"}) &&
      (out->contains("enum") || out->contains("const"))) {
    std::vector<Json> drop;
    if (n->contains("const")) drop.push_back((*n)["const"]);
    if (n->contains("enum") && (*n)["enum"].is_array())
      for (const Json& v : (*n)["enum"]) drop.push_back(v);
    if (out->contains("const") && !json_detail::values_disjoint(drop, {(*out)["const"]}))
      return bad(path, "'not' strikes the const: accepts no value");
    if (out->contains("enum")) {
      if (!(*out)["enum"].is_array()) return bad(path, "enum must be an array");
      Json keep = Json::array();
      for (const Json& v : (*out)["enum"])
        if (json_detail::values_disjoint(drop, {v})) keep.push_back(v);
      (*out)["enum"] = keep;
    }
    return ok_status();
  }
  return unsupported("not", path,
                     "only not of type, required, anyOf of those, or enum/const values beside "
                     "an enum");
}

}  // namespace deepinfer::grammar::json_detail

// The oneOf exclusivity analysis: whether no value satisfies two schemas (provably_disjoint), or
// no value the compiler writes for one satisfies the other (output_excludes). Sound, not
// complete: false means not proven.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "deepinfer/grammar/json_schema_merge.h"

namespace deepinfer::grammar::json_detail {
namespace {

// Drafts 4-7 ignore the keywords beside a $ref.
bool siblings_ignored(const Json& root) {
  if (!root.is_object() || !root.contains("$schema") || !root["$schema"].is_string()) return false;
  const std::string d = root["$schema"].get<std::string>();
  for (const char* old : {"draft-03", "draft-04", "draft-06", "draft-07"})
    if (d.find(old) != std::string::npos) return true;
  return false;
}

std::set<std::string> possible_types(const Json& s, const Json* root = nullptr, int depth = 0) {
  static const std::set<std::string> all = {"null",   "boolean", "integer", "number",
                                            "string", "array",   "object"};
  auto of_value = [](const Json& v) -> std::string {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "boolean";
    if (v.is_number()) return "number";
    if (v.is_string()) return "string";
    if (v.is_array()) return "array";
    return "object";
  };
  if (!s.is_object() || depth > 32) return all;
  std::set<std::string> out = all;
  // A reference holds beside the other keywords (drafts 4-7 ignore those, so the target's
  // types alone are a superset there too).
  if (root && s.contains("$ref") && s["$ref"].is_string()) {
    auto target = resolve_ref(*root, s["$ref"].get<std::string>(), "");
    if (target.ok()) out = possible_types(**target, root, depth + 1);
    if (siblings_ignored(*root)) return out;
  }
  if (s.contains("type")) {
    auto t = type_set(s["type"], "");
    if (t.ok()) out = *t;
  }
  if (s.contains("const")) out = intersect_types(out, {of_value(s["const"])});
  if (s.contains("enum") && s["enum"].is_array()) {
    std::set<std::string> vals;
    for (const Json& v : s["enum"]) vals.insert(of_value(v));
    out = intersect_types(out, vals);
  }
  // Every allOf part holds; some anyOf/oneOf branch holds ($ref parts are not followed).
  if (s.contains("allOf") && s["allOf"].is_array())
    for (const Json& part : s["allOf"])
      out = intersect_types(out, possible_types(part, root, depth + 1));
  for (const char* k : {"anyOf", "oneOf"}) {
    if (!s.contains(k) || !s[k].is_array()) continue;
    std::set<std::string> some;
    for (const Json& b : s[k])
      for (const std::string& t : possible_types(b, root, depth + 1)) some.insert(t);
    if (some.count("number")) some.insert("integer");
    out = intersect_types(out, some);
  }
  return out;
}

bool types_overlap(const std::set<std::string>& a, const std::set<std::string>& b) {
  return !intersect_types(a, b).empty();
}

// The finite value set of a schema (const / enum), if it has one.
std::optional<std::vector<Json>> values_of(const Json& s) {
  if (!s.is_object()) return std::nullopt;
  if (s.contains("const")) return std::vector<Json>{s["const"]};
  if (s.contains("enum") && s["enum"].is_array()) {
    return std::vector<Json>(s["enum"].begin(), s["enum"].end());
  }
  // Every allOf part holds, so any part's finite set bounds the schema's.
  if (s.contains("allOf") && s["allOf"].is_array())
    for (const Json& part : s["allOf"])
      if (auto v = values_of(part)) return v;
  return std::nullopt;
}

// JSON equality (ordered_json compares objects in member order; JSON does not).
bool same_value(const Json& x, const Json& y) {
  if (x.is_structured() || y.is_structured())
    return nlohmann::json::parse(x.dump()) == nlohmann::json::parse(y.dump());
  return x == y;
}

bool disjoint(const Json& root, const Json& a0, const Json& b0, int depth);

// The literal text every match of an anchored pattern ("^abc...") starts with: characters up to
// the first one that is special, quantified or escaped as a class; "" when the pattern is not
// anchored or has an alternation anywhere.
std::string literal_prefix(const std::string& p) {
  if (p.empty() || p[0] != '^' || p.find('|') != std::string::npos) return "";
  std::string out;
  for (size_t i = 1; i < p.size(); ++i) {
    char c = p[i];
    size_t next = i + 1;
    if (c == '\\') {
      if (i + 1 >= p.size() || std::isalnum(static_cast<unsigned char>(p[i + 1]))) break;
      c = p[i + 1];
      next = i + 2;
    } else if (std::string(".[](){}^$*+?").find(c) != std::string::npos) {
      break;
    }
    if (next < p.size() && std::string("?*{").find(p[next]) != std::string::npos) break;
    out += c;
    if (next < p.size() && p[next] == '+') break;
    i = next - 1;
  }
  return out;
}

// Code points of a UTF-8 string.
int64_t code_points(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// True only when v provably fails schema s (a few keywords checked by value; anything else is
// assumed to accept v).
bool value_fails(const Json& root, const Json& v, const Json& s0, int depth) {
  const Json* s = resolved(root, s0);
  if (!s || depth > 16) return false;
  if (s->is_boolean()) return !s->get<bool>();
  if (!s->is_object()) return false;
  if (s->contains("type")) {
    auto t = type_set((*s)["type"], "");
    if (t.ok() && !value_has_type(v, *t)) return true;
  }
  if (auto vals = values_of(*s); vals && values_disjoint(*vals, {v})) return true;
  if (v.is_string() && s->contains(kNotInKey) && (*s)[kNotInKey].is_array())
    for (const Json& x : (*s)[kNotInKey])
      if (x == v) return true;
  // not: {enum/const} that lists v.
  if (s->contains("not") && (*s)["not"].is_object()) {
    const Json& n = (*s)["not"];
    if (auto struck = values_of(n); struck && !values_disjoint(*struck, {v})) {
      bool only_values = true;
      for (const auto& [k, x] : n.items())
        only_values = only_values && (k == "enum" || k == "const" || is_inert(k));
      if (only_values) return true;
    }
  }
  if (v.is_string()) {
    const std::string str = v.get<std::string>();
    auto num = [&](const char* k) -> std::optional<double> {
      if (s->contains(k) && (*s)[k].is_number()) return (*s)[k].get<double>();
      return std::nullopt;
    };
    if (auto m = num("minLength"); m && code_points(str) < *m) return true;
    if (auto m = num("maxLength"); m && code_points(str) > *m) return true;
    if (s->contains("pattern") && (*s)["pattern"].is_string()) {
      auto found = ascii_pattern_finds((*s)["pattern"].get<std::string>(), str);
      if (found && !*found) return true;
    }
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    auto num = [&](const char* k) -> std::optional<double> {
      if (s->contains(k) && (*s)[k].is_number()) return (*s)[k].get<double>();
      return std::nullopt;
    };
    if (auto m = num("minimum"); m && x < *m) return true;
    if (auto m = num("maximum"); m && x > *m) return true;
    if (auto m = num("exclusiveMinimum"); m && x <= *m) return true;
    if (auto m = num("exclusiveMaximum"); m && x >= *m) return true;
  }
  if (v.is_object() && s->contains("properties") && (*s)["properties"].is_object()) {
    for (const auto& [k, sub] : (*s)["properties"].items())
      if (v.contains(k) && value_fails(root, v[k], sub, depth + 1)) return true;
  }
  if (v.is_object() && s->contains("required") && (*s)["required"].is_array()) {
    for (const Json& r : (*s)["required"])
      if (r.is_string() && !v.contains(r.get<std::string>())) return true;
  }
  return false;
}

// Every object valid under a has a member that no object valid under b can have.
bool object_excludes(const Json& root, const Json& a, const Json& b, int depth) {
  if (intersect_types(possible_types(a, &root), possible_types(b, &root)) !=
      std::set<std::string>{"object"})
    return false;
  if (!a.contains("required") || !a["required"].is_array()) return false;
  for (const Json& key : a["required"]) {
    if (!key.is_string()) continue;
    std::string k = key.get<std::string>();
    bool b_has =
        b.contains("properties") && b["properties"].is_object() && b["properties"].contains(k);
    if (!b_has) {
      if (name_forbidden(b, k)) return true;
      continue;
    }
    const Json* pb = resolved(root, b["properties"][k]);
    if (pb && pb->is_boolean() && !pb->get<bool>()) return true;
    if (!a.contains("properties") || !a["properties"].is_object() || !a["properties"].contains(k))
      continue;
    if (disjoint(root, a["properties"][k], b["properties"][k], depth + 1)) return true;
  }
  return false;
}

bool disjoint(const Json& root, const Json& a0, const Json& b0, int depth) {
  if (depth > 16) return false;
  // Types first, on the schemas as written ($ref beside other keywords is followed there).
  if (!types_overlap(possible_types(a0, &root), possible_types(b0, &root))) return true;
  const Json* a = resolved(root, a0);
  const Json* b = resolved(root, b0);
  if (!a || !b) return false;
  if (a->is_boolean() || b->is_boolean())
    return (a->is_boolean() && !a->get<bool>()) || (b->is_boolean() && !b->get<bool>());
  if (!types_overlap(possible_types(*a, &root), possible_types(*b, &root))) return true;
  auto va = values_of(*a), vb = values_of(*b);
  if (va && vb && values_disjoint(*va, *vb)) return true;
  // A finite value set all of whose members the other schema rejects.
  for (const auto& [vals, other] : {std::pair{va, b}, std::pair{vb, a}}) {
    if (!vals) continue;
    bool all_fail = true;
    for (const Json& v : *vals) all_fail = all_fail && value_fails(root, v, *other, depth + 1);
    if (all_fail) return true;
  }
  // Strings only, each with an anchored pattern whose literal prefixes diverge.
  if (intersect_types(possible_types(*a, &root), possible_types(*b, &root)) ==
          std::set<std::string>{"string"} &&
      a->contains("pattern") && b->contains("pattern") && (*a)["pattern"].is_string() &&
      (*b)["pattern"].is_string()) {
    const std::string pa = literal_prefix((*a)["pattern"].get<std::string>());
    const std::string pb = literal_prefix((*b)["pattern"].get<std::string>());
    const size_t n = std::min(pa.size(), pb.size());
    if (n > 0 && pa.compare(0, n, pb, 0, n) != 0) return true;
  }
  return object_excludes(root, *a, *b, depth) || object_excludes(root, *b, *a, depth);
}

// Whether the compiled schema a never writes member k: a property whose schema is false is never
// written (extra names differ from every listed one); otherwise a must be closed (explicit
// additionalProperties false, or strict mode with properties listed here or above) without
// listing or requiring k, and so must every anyOf/oneOf/allOf branch (which the compiler merges
// with a).
bool never_writes(const Json& root, const Json& a0, const std::string& k, bool strict,
                  bool props_above, int depth) {
  const Json* a = resolved(root, a0);
  if (!a || depth > 8) return false;
  if (a->is_boolean()) return !a->get<bool>();
  if (!a->is_object()) return false;
  const Json* props =
      a->contains("properties") && (*a)["properties"].is_object() ? &(*a)["properties"] : nullptr;
  if (props && props->contains(k) && (*props)[k] == false) return true;
  if (props && props->contains(k)) return false;
  if (a->contains("required") && (*a)["required"].is_array())
    for (const Json& r : (*a)["required"])
      if (r == k) return false;
  for (const char* kw : {"not", "if", "then", "else", "dependentRequired", "dependencies",
                         "patternProperties", "propertyNames"})
    if (a->contains(kw)) return false;  // these can add or rename members
  const bool listed = props_above || props;
  if (a->contains("additionalProperties")) {
    if ((*a)["additionalProperties"] != false) return false;
  } else if (!(strict && listed)) {
    return false;
  }
  for (const char* kw : {"anyOf", "oneOf", "allOf"}) {
    if (!a->contains(kw)) continue;
    if (!(*a)[kw].is_array()) return false;
    for (const Json& branch : (*a)[kw])
      if (!never_writes(root, branch, k, strict, listed, depth + 1)) return false;
  }
  return true;
}

bool output_excludes_at(const Json& root, const Json& a0, const Json& b0, bool strict, int depth) {
  if (depth > 8) return false;
  if (disjoint(root, a0, b0, 0)) return true;
  const Json* a = resolved(root, a0);
  const Json* b = resolved(root, b0);
  if (!a || !b || !a->is_object() || !b->is_object()) return false;
  // A value that fails every branch of b's union fails b, whatever b says beside it.
  for (const char* k : {"anyOf", "oneOf"}) {
    if (!b->contains(k) || !(*b)[k].is_array() || (*b)[k].empty()) continue;
    bool all = true;
    for (const Json& br : (*b)[k]) all = all && output_excludes_at(root, *a, br, strict, depth + 1);
    if (all) return true;
  }
  // A union with nothing beside it writes only its branches' output (siblings would be merged
  // into each branch and could widen what a branch alone writes).
  for (const char* k : {"anyOf", "oneOf"}) {
    if (!a->contains(k) || !(*a)[k].is_array() || (*a)[k].empty()) continue;
    bool pure = true;
    for (const auto& [kk, v] : a->items()) pure = pure && (kk == k || is_inert(kk));
    if (!pure) continue;
    bool all = true;
    for (const Json& br : (*a)[k]) all = all && output_excludes_at(root, br, *b, strict, depth + 1);
    if (all) return true;
  }
  // Values of a's other types fail b by type; so only a's objects matter.
  if (intersect_types(possible_types(*a, &root), possible_types(*b, &root)) !=
      std::set<std::string>{"object"})
    return false;
  if (!b->contains("required") || !(*b)["required"].is_array()) return false;
  for (const Json& r : (*b)["required"])
    if (r.is_string() && never_writes(root, *a, r.get<std::string>(), strict, false, 0))
      return true;
  return false;
}

}  // namespace

bool values_disjoint(const std::vector<Json>& a, const std::vector<Json>& b) {
  for (const Json& x : a) {
    for (const Json& y : b) {
      if (same_value(x, y)) return false;
    }
  }
  return true;
}

std::optional<bool> ascii_pattern_finds(const std::string& p, const std::string& s) {
  // std::regex sees bytes and ECMAScript's '$'; jsonschema's re sees code points and lets '$'
  // match before a final newline: on printable ASCII they agree, except on syntax one of them
  // reads differently (Python's \A \Z, inline flags and named groups, POSIX classes, \p).
  if (!std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7F; }))
    return std::nullopt;
  for (size_t i = 0; i + 1 < p.size(); ++i) {
    if (p[i] == '\\') {
      if (std::string("AZzGpPQEKNXRhHvV").find(p[i + 1]) != std::string::npos) return std::nullopt;
      ++i;
    } else if (p[i] == '(' && p[i + 1] == '?') {
      if (i + 2 >= p.size() || std::string(":=!").find(p[i + 2]) == std::string::npos)
        return std::nullopt;
    } else if (p[i] == '[' && p[i + 1] == ':') {
      return std::nullopt;
    }
  }
  try {
    return std::regex_search(s, std::regex(p, std::regex::ECMAScript));
  } catch (const std::regex_error&) {
    return std::nullopt;
  }
}

bool name_forbidden(const Json& b, const std::string& k) {
  if (!b.is_object() || !b.contains("additionalProperties") || b["additionalProperties"] != false)
    return false;
  if (b.contains("properties") && b["properties"].is_object() && b["properties"].contains(k))
    return false;
  if (!b.contains("patternProperties") || b["patternProperties"].empty()) return true;
  if (!b["patternProperties"].is_object()) return false;
  for (const auto& [p, sub] : b["patternProperties"].items()) {
    auto found = ascii_pattern_finds(p, k);
    if (!found || *found) return false;
  }
  return true;
}

bool provably_disjoint(const Json& root, const Json& a, const Json& b) {
  return disjoint(root, a, b, 0);
}

bool output_excludes(const Json& root, const Json& a0, const Json& b0, bool strict) {
  return output_excludes_at(root, a0, b0, strict, 0);
}

}  // namespace deepinfer::grammar::json_detail

// Keyword checks, $ref resolution and the allOf merge (the disjointness test is
// json_schema_disjoint.cc).
#include "deepinfer/grammar/json_schema_merge.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <vector>

#include "deepinfer/grammar/json_schema_keywords.h"

namespace deepinfer::grammar::json_detail {
namespace {

const std::set<std::string>& handled_keywords() {
  static const std::set<std::string> k = {"type",
                                          "enum",
                                          "const",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "items",
                                          "prefixItems",
                                          "minItems",
                                          "maxItems",
                                          "uniqueItems",
                                          "minLength",
                                          "maxLength",
                                          "pattern",
                                          "format",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum",
                                          "anyOf",
                                          "oneOf",
                                          "allOf",
                                          "$ref",
                                          "$defs",
                                          "definitions",
                                          "minProperties",
                                          "maxProperties",
                                          "multipleOf",
                                          "dependentRequired",
                                          "dependencies",
                                          "patternProperties",
                                          "not",
                                          "propertyNames",
                                          "if",
                                          "then",
                                          "else",
                                          "unevaluatedProperties"};
  return k;
}

std::string at(const std::string& path) { return path.empty() ? "/" : path; }

Status unsupported(const std::string& keyword, const std::string& path, const std::string& why) {
  return unimplemented("json schema: unsupported keyword '" + keyword + "' at " + at(path) +
                       (why.empty() ? "" : " (" + why + ")"));
}

// Follows top-level $refs (bounded, so a ref cycle is an error rather than a hang).
StatusOr<const Json*> deref(const Json& root, const Json* s, std::string* path) {
  for (int i = 0; i < 32; ++i) {
    if (!s->is_object() || !s->contains("$ref")) return s;
    const Json& r = (*s)["$ref"];
    if (!r.is_string())
      return invalid_argument("json schema at " + at(*path) + ": $ref must be a string");
    for (const auto& [k, v] : s->items()) {
      if (k != "$ref" && !is_inert(k)) {
        return unsupported(k, *path, "next to $ref");
      }
    }
    ASSIGN_OR_RETURN(s, resolve_ref(root, r.get<std::string>(), *path));
    *path = r.get<std::string>().substr(1);
  }
  return unsupported("$ref", *path, "a chain of more than 32 references");
}

// The parts [begin, end) collected under a schema with `unevaluatedProperties: S`: the ones
// whose annotations it sees (its own keywords, allOf, $ref; branches of a union are compiled
// later, each merged with these).
struct UnevaluatedScope {
  size_t begin, end;
  Json schema;
  std::string path;
};

Status collect(const Json& root, const Json& s, std::string path,
               std::vector<std::pair<Json, std::string>>* parts, int depth,
               std::vector<UnevaluatedScope>* scopes) {
  if (depth > 32) return unsupported("allOf", path, "nested too deeply");
  if (s.is_object() && s.contains("unevaluatedProperties")) {
    Json inner = s;
    inner.erase("unevaluatedProperties");
    const size_t begin = parts->size();
    RETURN_IF_ERROR(collect(root, inner, path, parts, depth + 1, scopes));
    scopes->push_back({begin, parts->size(), s["unevaluatedProperties"], path});
    return ok_status();
  }
  if (s.is_object() && s.contains("$ref")) {
    // Keywords beside $ref apply too (2019-09 on; drafts 4-7 ignore them, so requiring them
    // only narrows the output there).
    Json rest = Json::object();
    for (const auto& [k, v] : s.items())
      if (k != "$ref" && !is_inert(k)) rest[k] = v;
    if (!rest.empty()) RETURN_IF_ERROR(collect(root, rest, path, parts, depth + 1, scopes));
    if (!s["$ref"].is_string())
      return invalid_argument("json schema at " + at(path) + ": $ref must be a string");
    const std::string r = s["$ref"].get<std::string>();
    ASSIGN_OR_RETURN(const Json* target, resolve_ref(root, r, path));
    return collect(root, *target, r.substr(1), parts, depth + 1, scopes);
  }
  const Json* t = &s;
  if (t->is_boolean()) {
    if (t->get<bool>()) return ok_status();
    return invalid_argument("json schema at " + at(path) + ": schema 'false' accepts no value");
  }
  if (!t->is_object())
    return invalid_argument("json schema at " + at(path) +
                            ": a schema must be an object or a boolean");
  RETURN_IF_ERROR(check_keywords(*t, path, path.empty()));
  Json base = *t;
  base.erase("allOf");
  const bool conditional = base.contains("if") || base.contains("then") || base.contains("else");
  std::optional<Json> approx;
  if (conditional) {
    approx = conditional_approximation(base);
    base.erase("if");
    base.erase("then");
    base.erase("else");
  }
  parts->emplace_back(base, path);
  if (approx) RETURN_IF_ERROR(collect(root, *approx, path, parts, depth + 1, scopes));
  if (t->contains("allOf")) {
    const Json& all = (*t)["allOf"];
    if (!all.is_array() || all.empty()) {
      return invalid_argument("json schema at " + path + "/allOf: must be a non-empty array");
    }
    for (size_t i = 0; i < all.size(); ++i) {
      RETURN_IF_ERROR(
          collect(root, all[i], path + "/allOf/" + std::to_string(i), parts, depth + 1, scopes));
    }
  }
  return ok_status();
}

Status merge_into(Json* out, const Json& part, const std::string& path) {
  static const std::set<std::string> take_max = {"minimum", "exclusiveMinimum", "minLength",
                                                 "minItems", "minProperties"};
  static const std::set<std::string> take_min = {"maximum", "exclusiveMaximum", "maxLength",
                                                 "maxItems", "maxProperties"};
  for (const auto& [k, v] : part.items()) {
    if (is_inert(k)) continue;
    if (!out->contains(k)) {
      (*out)[k] = v;
      continue;
    }
    Json& o = (*out)[k];
    if (o == v) continue;
    if (k == "required" && o.is_array() && v.is_array()) {
      for (const Json& r : v) {
        if (std::find(o.begin(), o.end(), r) == o.end()) o.push_back(r);
      }
    } else if (k == "properties" && o.is_object() && v.is_object()) {
      for (const auto& [p, sub] : v.items()) {
        if (!o.contains(p)) {
          o[p] = sub;
        } else if (o[p] != sub) {
          o[p] = Json{{"allOf", Json::array({o[p], sub})}};
        }
      }
    } else if (k == "type") {
      ASSIGN_OR_RETURN(auto a, type_set(o, path));
      ASSIGN_OR_RETURN(auto b, type_set(v, path + "/type"));
      auto both = intersect_types(a, b);
      if (both.empty())
        return invalid_argument("json schema at " + at(path) + ": allOf types: accepts no value");
      o = Json::array();
      for (const std::string& t : both) o.push_back(t);
    } else if ((take_max.count(k) || take_min.count(k)) && o.is_number() && v.is_number()) {
      bool bigger = v.get<double>() > o.get<double>();
      if (take_max.count(k) == static_cast<size_t>(bigger)) o = v;
    } else if (k == "anyOf" && o.is_array() && v.is_array() && o.size() * v.size() <= 64) {
      // (A1 or A2) and (B1 or B2) = (A1 and B1) or (A1 and B2) or ...
      Json both = Json::array();
      for (const Json& x : o)
        for (const Json& y : v) both.push_back(Json{{"allOf", Json::array({x, y})}});
      o = std::move(both);
    } else if (k == "additionalProperties") {
      // Members no part lists must satisfy every part's additionalProperties (members one part
      // lists are settled in merge_all_of).
      if (o == false || v == false) {
        o = false;
      } else {
        o = Json{{"allOf", Json::array({o, v})}};
      }
    } else if (k == "not") {
      o = Json{{"anyOf", Json::array({o, v})}};  // not A and not B = not (A or B)
    } else if ((k == "dependencies" || k == "dependentRequired") && o.is_object() &&
               v.is_object()) {
      // Every part's dependencies hold: per name, names united or schemas both applied.
      auto as_schema = [](const Json& d) { return d.is_array() ? Json{{"required", d}} : d; };
      for (const auto& [name, d] : v.items()) {
        if (!o.contains(name)) {
          o[name] = d;
        } else if (o[name].is_array() && d.is_array()) {
          for (const Json& x : d)
            if (std::find(o[name].begin(), o[name].end(), x) == o[name].end()) o[name].push_back(x);
        } else if (o[name] != d) {
          o[name] = Json{{"allOf", Json::array({as_schema(o[name]), as_schema(d)})}};
        }
      }
    } else if (k == "enum" && o.is_array() && v.is_array()) {
      Json keep = Json::array();
      for (const Json& x : o) {
        if (std::find(v.begin(), v.end(), x) != v.end()) keep.push_back(x);
      }
      o = keep;
    } else {
      return unsupported(k, path, "allOf parts give it different values");
    }
  }
  return ok_status();
}

}  // namespace

std::optional<Json> conditional_approximation(const Json& s) {
  if (!s.contains("if")) return std::nullopt;  // then/else without if are ignored (the spec)
  const bool t = s.contains("then"), e = s.contains("else");
  if (t && !e) return s["then"];
  if (e && !t) return Json{{"anyOf", Json::array({s["if"], s["else"]})}};
  if (!t) return std::nullopt;
  return Json{{"anyOf", Json::array({Json{{"allOf", Json::array({s["if"], s["then"]})}},
                                     Json{{"allOf", Json::array({s["then"], s["else"]})}}})}};
}

bool is_annotation(const std::string& k) {
  // The content keywords only annotate strings (2019-09 on); anchors only name $ref targets,
  // which are resolved as JSON pointers.
  static const std::set<std::string> a = {"title",           "description",      "examples",
                                          "$comment",        "default",          "deprecated",
                                          "readOnly",        "writeOnly",        "$schema",
                                          "contentEncoding", "contentMediaType", "contentSchema",
                                          "$anchor",         "$dynamicAnchor",   "$vocabulary"};
  return a.count(k) > 0;
}

bool is_inert(const std::string& k) {
  return is_annotation(k) || k == "$defs" || k == "definitions" || k == "$id" || !is_keyword(k);
}

std::vector<std::string> unsupported_keywords(const Json& s, bool at_root) {
  std::vector<std::string> out;
  for (const auto& [k, v] : s.items()) {
    if (handled_keywords().count(k) || is_annotation(k) || !is_keyword(k)) continue;
    // A bare-fragment $id names the subschema without rebasing the references beneath it.
    if (k == "$id" && (at_root || (v.is_string() && v.get<std::string>().rfind('#', 0) == 0)))
      continue;
    out.push_back(k);
  }
  return out;
}

Status check_keywords(const Json& s, const std::string& path, bool at_root) {
  const std::vector<std::string> u = unsupported_keywords(s, at_root);
  return u.empty() ? ok_status() : unsupported(u[0], path, "");
}

std::string pointer_escape(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

StatusOr<const Json*> resolve_ref(const Json& root, const std::string& ref,
                                  const std::string& path) {
  if (ref.empty() || ref[0] != '#') {
    return unsupported("$ref", path,
                       "only local references starting with '#' are supported, got '" + ref + "'");
  }
  // Percent-decoding first (URI fragment), then JSON pointer tokens.
  std::string ptr;
  for (size_t i = 1; i < ref.size(); ++i) {
    if (ref[i] == '%' && i + 2 < ref.size() + 0 &&
        isxdigit(static_cast<unsigned char>(ref[i + 1])) &&
        isxdigit(static_cast<unsigned char>(ref[i + 2]))) {
      ptr += static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      ptr += ref[i];
    }
  }
  const Json* at_node = &root;
  if (ptr.empty()) return at_node;
  if (ptr[0] != '/') {
    return unsupported("$ref", path,
                       "anchors ('" + ref + "') are not supported, only JSON pointers");
  }
  size_t pos = 1;
  while (true) {
    size_t end = ptr.find('/', pos);
    std::string token = ptr.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    std::string key;
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
        key += token[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        key += token[i];
      }
    }
    if (at_node->is_object() && at_node->contains(key)) {
      at_node = &(*at_node)[key];
    } else if (at_node->is_array() && !key.empty() &&
               key.find_first_not_of("0123456789") == std::string::npos &&
               std::stoull(key) < at_node->size()) {
      at_node = &(*at_node)[std::stoull(key)];
    } else {
      return invalid_argument("json schema at " + at(path) + ": cannot resolve $ref '" + ref + "'");
    }
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return at_node;
}

const Json* resolved(const Json& root, const Json& s) {
  std::string path;
  auto r = deref(root, &s, &path);
  return r.ok() ? *r : nullptr;
}

StatusOr<std::set<std::string>> type_set(const Json& type, const std::string& path) {
  static const std::set<std::string> names = {"null",   "boolean", "integer", "number",
                                              "string", "array",   "object"};
  std::set<std::string> out;
  auto add = [&](const Json& t) -> Status {
    if (!t.is_string() || !names.count(t.get<std::string>())) {
      return invalid_argument("json schema at " + at(path) + "/type: unknown type " + t.dump());
    }
    out.insert(t.get<std::string>());
    return ok_status();
  };
  if (type.is_array()) {
    for (const Json& t : type) RETURN_IF_ERROR(add(t));
    if (out.empty())
      return invalid_argument("json schema at " + at(path) +
                              "/type: empty type list accepts no value");
  } else {
    RETURN_IF_ERROR(add(type));
  }
  return out;
}

std::set<std::string> intersect_types(const std::set<std::string>& a,
                                      const std::set<std::string>& b) {
  std::set<std::string> out;
  for (const std::string& t : a) {
    if (b.count(t)) out.insert(t);
    if (t == "number" && b.count("integer")) out.insert("integer");
    if (t == "integer" && b.count("number")) out.insert("integer");
  }
  return out;
}

bool value_has_type(const Json& v, const std::set<std::string>& types) {
  if (v.is_null()) return types.count("null");
  if (v.is_boolean()) return types.count("boolean");
  if (v.is_string()) return types.count("string");
  if (v.is_array()) return types.count("array");
  if (v.is_object()) return types.count("object");
  if (types.count("number")) return true;
  if (!types.count("integer")) return false;
  if (v.is_number_integer()) return true;
  double d = v.get<double>();
  return std::floor(d) == d;
}

StatusOr<Json> merge_all_of(const Json& root, const Json& schema, const std::string& path) {
  std::vector<std::pair<Json, std::string>> parts;
  std::vector<UnevaluatedScope> scopes;
  RETURN_IF_ERROR(collect(root, schema, path, &parts, 0, &scopes));
  Json out = Json::object();
  for (const auto& [part, ppath] : parts) RETURN_IF_ERROR(merge_into(&out, part, ppath));
  // unevaluatedProperties: S is met when additionalProperties: S holds beside the properties
  // its scope lists (what the scope evaluates is a superset of those): S then judges every
  // other member, as a part's additionalProperties does below. Where a part of the scope has
  // additionalProperties, every member is evaluated and S says nothing.
  for (const UnevaluatedScope& sc : scopes) {
    if (sc.schema == true) continue;
    bool evaluates_all = false;
    Json listed = Json::object();
    for (size_t i = sc.begin; i < sc.end; ++i) {
      const Json& part = parts[i].first;
      if (part.contains("additionalProperties")) evaluates_all = true;
      if (part.contains("properties") && part["properties"].is_object())
        for (const auto& [k, v] : part["properties"].items()) listed[k] = true;
    }
    if (evaluates_all) continue;
    Json judge = Json::object();
    judge["additionalProperties"] = sc.schema;
    RETURN_IF_ERROR(merge_into(&out, judge, sc.path));
    judge["properties"] = listed;
    parts.emplace_back(judge, sc.path);
  }
  // A part's additionalProperties (other than true) must accept every property of the merge.
  for (const auto& [part, ppath] : parts) {
    if (!part.contains("additionalProperties") || part["additionalProperties"] == true) continue;
    std::vector<std::string> names;
    if (out.contains("properties")) {
      for (const auto& [k, v] : out["properties"].items()) names.push_back(k);
    }
    if (out.contains("required")) {
      for (const Json& r : out["required"]) {
        if (r.is_string()) names.push_back(r.get<std::string>());
      }
    }
    for (const std::string& n : names) {
      bool own = part.contains("properties") && part["properties"].is_object() &&
                 part["properties"].contains(n);
      if (own) continue;
      // Another part's member is an additional one for this part: it must also satisfy this
      // part's additionalProperties (false: it is never written).
      const Json& ap = part["additionalProperties"];
      const bool required =
          out.contains("required") && out["required"].is_array() &&
          std::find(out["required"].begin(), out["required"].end(), n) != out["required"].end();
      if (ap == false && required)
        return unsupported("additionalProperties", ppath,
                           "in allOf it forbids property '" + n + "' that another part requires");
      if (!out.contains("properties") || !out["properties"].is_object())
        out["properties"] = Json::object();
      Json& slot = out["properties"][n];
      if (ap == false) {
        slot = false;
      } else {
        slot = slot.is_null() ? ap : Json{{"allOf", Json::array({slot, ap})}};
      }
    }
  }
  return out;
}

}  // namespace deepinfer::grammar::json_detail

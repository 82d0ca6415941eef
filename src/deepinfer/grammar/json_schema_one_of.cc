// SchemaCompiler: anyOf/oneOf, and the narrowings that make oneOf branches exclusive.
#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "deepinfer/grammar/json_schema_compiler.h"

namespace deepinfer::grammar::json_detail {

Json SchemaCompiler::flattened(const Json& s, const std::string& path) {
  if (!s.is_object() || !(s.contains("$ref") || s.contains("allOf"))) return s;
  Json all = Json::object();
  all["allOf"] = Json::array({s});
  auto m = json_detail::merge_all_of(root_, all, path);
  return m.ok() ? *m : s;
}

bool SchemaCompiler::require_discriminator(Json* a, const Json& b0, const std::string& path) {
  const Json b = flattened(b0, path);
  Json fa = flattened(*a, path);
  if (!fa.is_object() || !b.is_object() || !fa.contains("properties") ||
      !b.contains("properties") || !fa["properties"].is_object() || !b["properties"].is_object())
    return false;
  std::optional<std::string> found;
  for (const auto& [name, sub] : fa["properties"].items()) {
    if (!b["properties"].contains(name) || sub == false) continue;
    if (!json_detail::provably_disjoint(root_, sub, b["properties"][name])) continue;
    found = name;
    break;
  }
  if (found) {
    const std::string name = *found;  // fa changes below
    if (!fa.contains("required") || !fa["required"].is_array()) fa["required"] = Json::array();
    if (std::find(fa["required"].begin(), fa["required"].end(), Json(name)) == fa["required"].end())
      fa["required"].push_back(name);
    *a = std::move(fa);
    return true;
  }
  return false;
}

bool SchemaCompiler::require_forbidden_member(Json* a, const Json& b0, const std::string& path) {
  const Json b = flattened(b0, path);
  Json fa = flattened(*a, path);
  if (!fa.is_object() || !b.is_object() || !fa.contains("properties") ||
      !fa["properties"].is_object())
    return false;
  std::optional<std::string> found;
  for (const auto& [name, sub] : fa["properties"].items()) {
    if (sub == false || !json_detail::name_forbidden(b, name)) continue;
    found = name;
    break;
  }
  if (found) {
    const std::string name = *found;  // fa changes below
    if (!fa.contains("required") || !fa["required"].is_array()) fa["required"] = Json::array();
    if (std::find(fa["required"].begin(), fa["required"].end(), Json(name)) == fa["required"].end())
      fa["required"].push_back(name);
    *a = std::move(fa);
    return true;
  }
  return false;
}

std::optional<std::vector<Json>> SchemaCompiler::pinned_values(const Json& s0, const std::string& p,
                                                               int depth) {
  if (depth > 16) return std::nullopt;
  const Json* s = &s0;
  for (int i = 0; i < 32 && s->is_object() && s->contains("$ref"); ++i) {
    if (!(*s)["$ref"].is_string()) return std::nullopt;
    auto t = json_detail::resolve_ref(root_, (*s)["$ref"].get<std::string>(), "");
    if (!t.ok()) return std::nullopt;
    s = *t;
  }
  if (!s->is_object()) return std::nullopt;
  if (s->contains("properties") && (*s)["properties"].is_object() &&
      (*s)["properties"].contains(p)) {
    const Json& ps = (*s)["properties"][p];
    if (ps.is_object() && ps.contains("const")) return std::vector<Json>{ps["const"]};
    if (ps.is_object() && ps.contains("enum") && ps["enum"].is_array())
      return std::vector<Json>(ps["enum"].begin(), ps["enum"].end());
  }
  if (s->contains("allOf") && (*s)["allOf"].is_array()) {
    for (const Json& part : (*s)["allOf"])
      if (auto vals = pinned_values(part, p, depth + 1)) return vals;
  }
  for (const char* k : {"anyOf", "oneOf"}) {
    if (!s->contains(k) || !(*s)[k].is_array() || (*s)[k].empty()) continue;
    std::vector<Json> all;
    for (const Json& b : (*s)[k]) {
      auto v = pinned_values(b, p, depth + 1);
      if (!v) return std::nullopt;
      all.insert(all.end(), v->begin(), v->end());
    }
    return all;
  }
  return std::nullopt;
}

bool SchemaCompiler::require_pinned_discriminator(Json* a, const Json& b, const std::string& path) {
  std::set<std::string> names;
  std::function<void(const Json&, int)> collect = [&](const Json& s0, int depth) {
    if (depth > 8) return;
    const Json* s = &s0;
    if (s->is_object() && s->contains("$ref") && (*s)["$ref"].is_string()) {
      auto t = json_detail::resolve_ref(root_, (*s)["$ref"].get<std::string>(), path);
      if (!t.ok()) return;
      s = *t;
    }
    if (!s->is_object()) return;
    if (s->contains("properties") && (*s)["properties"].is_object())
      for (const auto& [k, v] : (*s)["properties"].items()) names.insert(k);
    for (const char* k : {"allOf", "anyOf", "oneOf"})
      if (s->contains(k) && (*s)[k].is_array())
        for (const Json& x : (*s)[k]) collect(x, depth + 1);
  };
  collect(*a, 0);
  for (const std::string& p : names) {
    auto va = pinned_values(*a, p, 0), vb = pinned_values(b, p, 0);
    if (!va || !vb || !json_detail::values_disjoint(*va, *vb)) continue;
    if (!a->is_object()) return false;
    if (a->contains("$ref")) {
      Json all = Json::object();
      all["allOf"] = Json::array({*a});
      auto m = json_detail::merge_all_of(root_, all, path);
      if (!m.ok()) return false;
      *a = std::move(*m);
    }
    if (a->contains("type")) {
      auto t = json_detail::type_set((*a)["type"], path);
      if (!t.ok() || !t->count("object")) return false;
    }
    (*a)["type"] = "object";
    if (!a->contains("required") || !(*a)["required"].is_array()) (*a)["required"] = Json::array();
    if (std::find((*a)["required"].begin(), (*a)["required"].end(), Json(p)) ==
        (*a)["required"].end())
      (*a)["required"].push_back(p);
    return true;
  }
  return false;
}

bool SchemaCompiler::exclude_required_of(Json* a, const Json& b0, const std::string& path) {
  const Json* b = &b0;
  if (b->is_object() && b->contains("$ref") && (*b)["$ref"].is_string()) {
    auto t = json_detail::resolve_ref(root_, (*b)["$ref"].get<std::string>(), path);
    if (!t.ok()) return false;
    b = *t;
  }
  if (!a->is_object() || !b->is_object() || !b->contains("required") ||
      !(*b)["required"].is_array())
    return false;
  if (a->contains("$ref")) {  // flatten, so that a property can be added
    Json all = Json::object();
    all["allOf"] = Json::array({*a});
    auto m = json_detail::merge_all_of(root_, all, path);
    if (!m.ok()) return false;
    *a = std::move(*m);
  }
  std::set<std::string> own;
  if (a->contains("required") && (*a)["required"].is_array())
    for (const Json& r : (*a)["required"])
      if (r.is_string()) own.insert(r.get<std::string>());
  for (const Json& r : (*b)["required"]) {
    if (!r.is_string() || own.count(r.get<std::string>())) continue;
    if (!a->contains("properties") || !(*a)["properties"].is_object())
      (*a)["properties"] = Json::object();
    (*a)["properties"][r.get<std::string>()] = false;
    // Only objects then (b's `required` holds for every other value).
    if (a->contains("type")) {
      auto t = json_detail::type_set((*a)["type"], path);
      if (!t.ok() || !t->count("object")) return false;
    }
    (*a)["type"] = "object";
    return true;
  }
  return false;
}

bool SchemaCompiler::exclude_values_of(Json* a, const Json& b0, const std::string& path) {
  const Json* b = &b0;
  if (b->is_object() && b->contains("$ref") && (*b)["$ref"].is_string()) {
    auto t = json_detail::resolve_ref(root_, (*b)["$ref"].get<std::string>(), path);
    if (!t.ok()) return false;
    b = *t;
  }
  if (!b->is_object() || !a->is_object() || !a->contains("type")) return false;
  std::vector<Json> vals;
  if (b->contains("const"))
    vals.push_back((*b)["const"]);
  else if (b->contains("enum") && (*b)["enum"].is_array())
    vals.assign((*b)["enum"].begin(), (*b)["enum"].end());
  else
    return false;
  for (const char* k : {"$ref", "pattern", "format", "minLength", "maxLength", "enum", "const",
                        "anyOf", "oneOf", "allOf", "not", "if"})
    if (a->contains(k)) return false;
  auto types = json_detail::type_set((*a)["type"], path);
  if (!types.ok()) return false;
  Json list = a->contains(json_detail::kNotInKey) ? (*a)[json_detail::kNotInKey] : Json::array();
  for (const Json& v : vals) {
    if (v.is_string()) {
      list.push_back(v);
    } else if (json_detail::value_has_type(v, *types)) {
      return false;  // only strings can be struck
    }
  }
  (*a)[json_detail::kNotInKey] = list;
  return true;
}

StatusOr<Element> SchemaCompiler::union_of(const Json& s, const std::string& path, int depth) {
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
  siblings.erase("$id");  // checked where it stands; merged below the root it would not be
  bool plain = true;      // only annotations beside the union: keep branches (and their $refs)
  for (const auto& [k, v] : siblings.items()) {
    if (!json_detail::is_inert(k)) plain = false;
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
    auto m = json_detail::merge_all_of(root_, both, bpath);
    if (!m.ok()) {
      // A branch that contradicts its siblings accepts nothing and drops out.
      if (m.status().message().find("accepts no value") == std::string::npos) return m.status();
      continue;
    }
    merged.push_back(std::move(*m));
  }
  if (merged.empty()) return bad(path, "every branch contradicts its siblings: accepts no value");
  if (one) {
    // Every branch's output must fail every other branch. Where that is not shown, a branch
    // that does not require a name another branch requires is narrowed to never write it
    // (oneOf [{required [a]}, {required [b]}]: "a without b" or "b without a"; objects with
    // both match both branches, which oneOf rejects).
    // Output of the narrowed branch i is checked against branch j as written (narrowing j
    // changes only what is written for j, not what j accepts).
    const std::vector<Json> as_written = merged;
    std::vector<bool> dropped(merged.size(), false);
    for (size_t i = 0; i < merged.size(); ++i) {
      for (size_t j = 0; j < merged.size() && !dropped[i]; ++j) {
        if (i == j ||
            json_detail::output_excludes(root_, merged[i], as_written[j], options_.strict))
          continue;
        if ((exclude_required_of(&merged[i], as_written[j], path) ||
             exclude_values_of(&merged[i], as_written[j], path)) &&
            json_detail::output_excludes(root_, merged[i], as_written[j], options_.strict))
          continue;
        // A member both pin to disjoint value sets, through unions too (proven directly).
        if (require_pinned_discriminator(&merged[i], as_written[j], path)) continue;
        // Against b merged flat (the same schema), with a discriminator a now requires.
        if (require_discriminator(&merged[i], as_written[j], path) &&
            json_detail::output_excludes(root_, merged[i], flattened(as_written[j], path),
                                         options_.strict))
          continue;
        // A member j forbids, made required.
        if (require_forbidden_member(&merged[i], as_written[j], path) &&
            json_detail::output_excludes(root_, merged[i], flattened(as_written[j], path),
                                         options_.strict))
          continue;
        // A branch whose output cannot be shown to fail branch j is left out (sound: its
        // values are not written; where they do match j too, oneOf rejects them anyway), as
        // long as a branch that is more than a few listed values is kept.
        dropped[i] = true;
      }
    }
    std::vector<Json> kept;
    std::string first_dropped;
    bool substantial = false;
    for (size_t i = 0; i < merged.size(); ++i) {
      if (dropped[i]) {
        if (first_dropped.empty()) first_dropped = std::to_string(i);
        continue;
      }
      const Json& b = merged[i];
      if (!(b.is_object() && (b.contains("enum") || b.contains("const") ||
                              (b.contains("type") && b["type"] == "null"))))
        substantial = true;
      kept.push_back(std::move(merged[i]));
    }
    if (!first_dropped.empty() && !substantial)
      return unsupported("oneOf", path,
                         "branch " + first_dropped +
                             " may overlap another, so exclusivity cannot be enforced; use anyOf");
    merged = std::move(kept);
  }
  Fragment alts;
  Status last_error;
  std::optional<Status> first_unsupported;
  bool substantial = false;
  for (size_t i = 0; i < merged.size(); ++i) {
    std::string bpath = path + "/" + key + "/" + std::to_string(i);
    auto e =
        plain ? value(merged[i], bpath, depth + 1, false) : value_memo(merged[i], bpath, depth + 1);
    if (!e.ok()) {
      // An unsatisfiable branch only drops out. So does one with unsupported keywords, as
      // long as a substantial branch compiles (sound: its values are not written; a oneOf's
      // exclusivity was shown against it above).
      const bool no_value = e.status().code() == StatusCode::kInvalidArgument &&
                            e.status().message().find("accepts no value") != std::string::npos;
      if (!no_value && e.status().code() != StatusCode::kUnimplemented) return e.status();
      if (!no_value && !first_unsupported) first_unsupported = e.status();
      last_error = e.status();
      continue;
    }
    alts.push_back(Sequence{*e});
    const Json& b = merged[i];
    if (!(b.is_object() && (b.contains("enum") || b.contains("const") ||
                            (b.contains("type") && b["type"] == "null"))))
      substantial = true;
  }
  if (first_unsupported && !substantial) return *first_unsupported;
  if (alts.empty()) return last_error;
  return jb_.rule_of(alts, key);
}

}  // namespace deepinfer::grammar::json_detail

#include "deepinfer/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "deepinfer/grammar/json_schema_builder.h"
#include "deepinfer/grammar/json_schema_keywords.h"
#include "deepinfer/grammar/json_schema_merge.h"
#include "deepinfer/grammar/json_schema_primitives.h"
#include "deepinfer/grammar/regex_parser.h"

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
    if (!prune_unproductive(&g)) return bad("", "schema accepts no value");
    RETURN_IF_ERROR(check_grammar_size(g, /*expanded=*/false, "json schema: the schema"));
    return g;
  }

 private:
  // Drops every alternative that uses a rule deriving no string (a $ref whose target failed
  // after a recursive use of it, a branch left without alternatives), so that no prefix leads
  // the matcher into a dead end. False when the root itself derives nothing.
  static bool prune_unproductive(Grammar* g) {
    std::vector<bool> productive(g->rules.size(), false);
    auto alt_ok = [&](const Sequence& seq) {
      for (const Element& e : seq)
        if (e.kind == Element::Kind::kRule && !productive[e.index]) return false;
      return true;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < g->rules.size(); ++r) {
        if (productive[r]) continue;
        for (const Sequence& seq : g->rules[r].alternatives) {
          if (alt_ok(seq)) {
            productive[r] = true;
            changed = true;
            break;
          }
        }
      }
    }
    for (Rule& rule : g->rules) {
      auto& alts = rule.alternatives;
      alts.erase(std::remove_if(alts.begin(), alts.end(),
                                [&](const Sequence& seq) { return !alt_ok(seq); }),
                 alts.end());
    }
    return productive[g->root];
  }

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
      return value_memo(merged, path, depth + 1);
    }
    if (s.contains("if") || s.contains("then") || s.contains("else")) {
      Json rest = s;
      for (const char* k : {"if", "then", "else", "$id"}) rest.erase(k);
      std::optional<Json> approx = json_detail::conditional_approximation(s);
      if (!approx) return value(rest, path, depth + 1, false);
      Json both = Json::object();
      both["allOf"] = Json::array({rest, *approx});
      ASSIGN_OR_RETURN(Json merged, json_detail::merge_all_of(root_, both, path));
      return value_memo(merged, path, depth + 1);
    }
    if (s.contains("not") && !s.contains("anyOf") && !s.contains("oneOf")) {  // else per branch
      Json rest = s;
      rest.erase("not");
      rest.erase("$id");  // checked where it stands
      RETURN_IF_ERROR(negate_into(&rest, s["not"], path + "/not", 0));
      return value(rest, path, depth + 1, false);
    }
    if (s.contains("anyOf") || s.contains("oneOf")) return union_of(s, path, depth);
    if (s.contains("enum") || s.contains("const")) return enumeration(s, path);
    return typed(s, path, depth);
  }

  bool siblings_ignored_beside_ref() const {
    if (!root_.is_object() || !root_.contains("$schema") || !root_["$schema"].is_string())
      return false;
    const std::string d = root_["$schema"].get<std::string>();
    for (const char* old : {"draft-03", "draft-04", "draft-06", "draft-07"})
      if (d.find(old) != std::string::npos) return true;
    return false;
  }

  // A schema made by merging (allOf, siblings of $ref or of a union branch): one rule per
  // distinct merged text, made before its body, so that a merge that recurs through its own
  // references (a branch {$ref: "#"} beside sibling keywords) reuses the rule instead of being
  // inlined again without end.
  StatusOr<Element> value_memo(const Json& merged, const std::string& path, int depth) {
    const std::string key = "merged:" + merged.dump();
    if (auto it = ref_rules_.find(key); it != ref_rules_.end())
      return Element{Element::Kind::kRule, it->second};
    const uint32_t r = jb_.b().add_rule("merged");
    const size_t log_size = ref_log_.size();
    ref_rules_.emplace(key, r);
    ref_log_.push_back(key);
    StatusOr<Element> e = value(merged, path, depth, false);
    if (!e.ok()) {
      while (ref_log_.size() > log_size) {
        ref_rules_.erase(ref_log_.back());
        ref_log_.pop_back();
      }
      return e.status();
    }
    jb_.b().rule(r).alternatives = {Sequence{*e}};
    return Element{Element::Kind::kRule, r};
  }

  StatusOr<Element> ref(const Json& s, const std::string& path, int depth) {
    if (!s["$ref"].is_string()) return bad(path + "/$ref", "must be a string");
    std::string target = s["$ref"].get<std::string>();
    for (const auto& [k, v] : s.items()) {
      if (k != "$ref" && !json_detail::is_inert(k)) {
        // Keywords beside $ref apply too (2019-09 on; drafts 4-7 ignore them, so requiring
        // them only narrows the output there).
        // Inlining the target again beneath itself would not end; such a reference is
        // compiled alone (drafts 4-7) or refused.
        if (inlining_.count(target)) {
          if (siblings_ignored_beside_ref()) break;
          return unsupported(k, path, "next to a recursive $ref");
        }
        Json self = s;
        self.erase("$id");  // checked where it stands (root or bare fragment)
        Json both = Json::object();
        both["allOf"] = Json::array({self});
        auto merged = json_detail::merge_all_of(root_, both, path);
        inlining_.insert(target);
        StatusOr<Element> e =
            merged.ok() ? value_memo(*merged, path, depth + 1) : StatusOr<Element>(merged.status());
        inlining_.erase(target);
        // Drafts 4-7 ignore $ref's siblings, so the reference alone is sound there (a merge
        // cannot inline a reference to itself).
        if (e.ok() || !siblings_ignored_beside_ref()) return e;
        break;
      }
    }
    auto it = ref_rules_.find(target);
    if (it != ref_rules_.end()) return Element{Element::Kind::kRule, it->second};
    ASSIGN_OR_RETURN(const Json* t, json_detail::resolve_ref(root_, target, path));
    // The rule exists before its body is compiled, so recursive references terminate.
    uint32_t r = jb_.b().add_rule("ref" + target);
    const size_t log_size = ref_log_.size();
    ref_rules_.emplace(target, r);
    ref_log_.push_back(target);
    std::string target_path = target.substr(1);
    StatusOr<Element> compiled = value(*t, target_path, depth + 1, target_path.empty());
    if (!compiled.ok()) {
      // The caller may drop this branch and go on: forget the rules of this failed body, so a
      // later reference compiles its target afresh instead of reusing an empty rule.
      while (ref_log_.size() > log_size) {
        ref_rules_.erase(ref_log_.back());
        ref_log_.pop_back();
      }
      return compiled.status();
    }
    Element body = *compiled;
    jb_.b().rule(r).alternatives = {Sequence{body}};
    return Element{Element::Kind::kRule, r};
  }

  // Narrows `out` so that no value it accepts satisfies `n` (what `not: n` beside it means),
  // for the forms of `n` that have such a narrowing: types; `required` (the value must be an
  // object without one of the names: the first that `out` does not require becomes `false`);
  // `anyOf` of those (each negated in turn); enum/const values, struck from `out`'s enum.
  Status negate_into(Json* out, const Json& n0, const std::string& path, int depth) {
    if (depth > 8) return unsupported("not", path, "nested too deeply");
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
    if (keys == std::set<std::string>{"anyOf"} && (*n)["anyOf"].is_array()) {
      for (const Json& b : (*n)["anyOf"]) RETURN_IF_ERROR(negate_into(out, b, path, depth + 1));
      return ok_status();
    }
    if ((keys == std::set<std::string>{"enum"} || keys == std::set<std::string>{"const"}) &&
        !out->contains("enum") && !out->contains("const")) {
      // Strings struck from a plain string schema (json_detail::kNotInKey).
      for (const char* k : {"pattern", "format", "minLength", "maxLength"})
        if (out->contains(k))
          return unsupported("not", path, "enum/const beside " + std::string(k));
      ASSIGN_OR_RETURN(auto have, types_of_out());
      std::vector<Json> drop;
      if (n->contains("const")) drop.push_back((*n)["const"]);
      if (n->contains("enum") && (*n)["enum"].is_array())
        for (const Json& v : (*n)["enum"]) drop.push_back(v);
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

  // Makes *a (a merged oneOf branch) never write one member that b requires and a does not,
  // as `properties: {name: false}`. False when there is none.
  // An equivalent schema without top-level $ref/allOf (merged), or s itself when that fails.
  Json flattened(const Json& s, const std::string& path) {
    if (!s.is_object() || !(s.contains("$ref") || s.contains("allOf"))) return s;
    Json all = Json::object();
    all["allOf"] = Json::array({s});
    auto m = json_detail::merge_all_of(root_, all, path);
    return m.ok() ? *m : s;
  }

  // Makes *a require a property whose schemas in a and b are provably disjoint (an optional
  // discriminator such as `type: {const: X}`), so that its output fails b. False when none.
  bool require_discriminator(Json* a, const Json& b0, const std::string& path) {
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
      if (std::find(fa["required"].begin(), fa["required"].end(), Json(name)) ==
          fa["required"].end())
        fa["required"].push_back(name);
      *a = std::move(fa);
      return true;
    }
    return false;
  }

  // The values member p may take in an object valid under s (whatever s says of other types),
  // where s pins p to a finite set: `properties/p` with enum/const, through $ref, any allOf part,
  // or every anyOf/oneOf branch (their union). nullopt otherwise.
  std::optional<std::vector<Json>> pinned_values(const Json& s0, const std::string& p, int depth) {
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

  // Narrows *a to objects that require a member p which both a and b pin to disjoint value sets;
  // then everything written for a is an object whose p b never accepts. True when done.
  bool require_pinned_discriminator(Json* a, const Json& b, const std::string& path) {
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
      if (!a->contains("required") || !(*a)["required"].is_array())
        (*a)["required"] = Json::array();
      if (std::find((*a)["required"].begin(), (*a)["required"].end(), Json(p)) ==
          (*a)["required"].end())
        (*a)["required"].push_back(p);
      return true;
    }
    return false;
  }

  bool exclude_required_of(Json* a, const Json& b0, const std::string& path) {
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

  // Makes *a (a merged oneOf branch that writes plain strings) never write the strings of b's
  // finite value set (json_detail::kNotInKey). False when b has none or a is not such a branch.
  bool exclude_values_of(Json* a, const Json& b0, const std::string& path) {
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
        return unsupported(
            "oneOf", path,
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
      auto e = plain ? value(merged[i], bpath, depth + 1, false)
                     : value_memo(merged[i], bpath, depth + 1);
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

  // Whether value v satisfies keyword k of s: a keyword of another instance type always holds;
  // a few are checked; nullopt for the rest (the caller refuses).
  static std::optional<bool> keyword_holds(const Json& v, const std::string& k, const Json& s) {
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

  // Whether pattern p finds a match in string v (the spec's unanchored search), where that is
  // certain: std::regex agrees with ECMA-262 and Python's re on printable ASCII text.
  static std::optional<bool> pattern_finds(const std::string& p, const Json& v) {
    const std::string str = v.get<std::string>();
    if (!std::all_of(str.begin(), str.end(), [](char c) { return c >= 0x20 && c < 0x7F; }))
      return std::nullopt;
    try {
      return std::regex_search(str, std::regex(p, std::regex::ECMAScript));
    } catch (const std::regex_error&) {
      return std::nullopt;
    }
  }

  StatusOr<Element> enumeration(const Json& s, const std::string& path) {
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
      if (!json_detail::is_inert(k)) {
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
    if (s.contains(json_detail::kNotInKey)) {  // a narrowed oneOf branch (exclude_values_of)
      for (const char* k : {"pattern", "format", "minLength", "maxLength"})
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
    std::string re;
    const char* source = nullptr;
    if (s.contains("format")) {
      if (!s["format"].is_string()) return bad(path + "/format", "must be a string");
      std::string f = s["format"].get<std::string>();
      auto r = json_detail::format_regex(f);
      // A name no draft defines is a custom format: an annotation unless both sides agree on
      // it (validators pass unknown formats), so it constrains nothing.
      if (!r && json_detail::is_standard_format(f))
        return unsupported("format", path, "format '" + f + "' is not supported");
      if (r) {
        re = *r;
        source = "format";
      }
    }
    if (s.contains("pattern")) {
      if (source) return unsupported("pattern", path, "together with format");
      if (!s["pattern"].is_string()) return bad(path + "/pattern", "must be a string");
      re = s["pattern"].get<std::string>();
      source = "pattern";
    }
    if (!source) return jb_.string(min, max);
    if (has_len) {
      // A length bound that every string of the pattern/format already meets is redundant.
      // Otherwise, with a maxLength, the pattern's unbounded repetitions are capped at the
      // largest k that keeps every string within the bounds (a subset of the pattern).
      auto fits = [&](const std::string& r) {
        auto g = parse_regex(r);
        if (!g.ok()) return false;
        auto [lo, hi] = json_detail::code_point_length_range(*g);
        return lo >= min && (!max || (hi && *hi <= *max));
      };
      if (!fits(re)) {
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
        if (!best)
          return unsupported(s.contains("minLength") ? "minLength" : "maxLength", path,
                             std::string("together with ") + source +
                                 " whose strings are not all within the bounds");
        re = *best;
      }
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

  // The finite set of values a schema accepts (enum/const filtered by type, boolean, null), in
  // schema order and without JSON-equal repeats; nullopt when it is not such a schema.
  std::optional<std::vector<Json>> finite_values(const Json& s0) {
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

  // uniqueItems over a finite item set: the items are distinct values written in the order of
  // the set (each at most once), between min and max of them. Exact as to which arrays of
  // distinct values pass, but only one order of them is written.
  StatusOr<Element> unique_subsequence(const std::vector<Json>& values, int64_t min,
                                       std::optional<int64_t> max, const std::string& path) {
    const int64_t k = static_cast<int64_t>(values.size());
    const int64_t most = max ? std::min(*max, k) : k;
    if (min > most) return bad(path, "uniqueItems with minItems accepts no value");
    Element comma = jb_.rule_of({Sequence{jb_.ws(), jb_.lit(",", "c"), jb_.ws()}}, "comma");
    std::vector<Element> lits;
    for (const Json& v : values) lits.push_back(literal_value(v));
    // rest[i][c]: items from values[i..] given c already written (c >= 1); nullopt: impossible.
    std::map<std::pair<int64_t, int64_t>, std::optional<Element>> memo;
    std::function<std::optional<Element>(int64_t, int64_t)> rest = [&](int64_t i, int64_t c) {
      auto key = std::make_pair(i, c);
      if (auto it = memo.find(key); it != memo.end()) return it->second;
      Fragment alts;
      if (i == k) {
        if (c >= min) alts.push_back(Sequence{});
      } else {
        if (auto skip = rest(i + 1, c)) alts.push_back(Sequence{*skip});
        if (c < most)
          if (auto take = rest(i + 1, c + 1)) alts.push_back(Sequence{comma, lits[i], *take});
      }
      std::optional<Element> e;
      if (!alts.empty()) e = jb_.rule_of(alts, "unique");
      return memo[key] = e;
    };
    Fragment firsts;  // the first item written is values[i]
    for (int64_t i = 0; i < k && most >= 1; ++i)
      if (auto r = rest(i + 1, 1)) firsts.push_back(Sequence{lits[i], *r});
    Element open = jb_.lit("[", "o"), close = jb_.lit("]", "c");
    Fragment alts;
    if (min == 0) alts.push_back(Sequence{open, jb_.ws(), close});
    if (!firsts.empty())
      alts.push_back(Sequence{open, jb_.ws(), jb_.rule_of(firsts, "unique"), jb_.ws(), close});
    if (alts.empty()) return bad(path, "array accepts no value");
    return jb_.rule_of(alts, "array");
  }

  StatusOr<Element> array(const Json& s, const std::string& path, int depth) {
    int64_t min = 0;
    std::optional<int64_t> max;
    if (s.contains("minItems")) {
      ASSIGN_OR_RETURN(min, count(s, "minItems", path));
    }
    if (s.contains("maxItems")) {
      ASSIGN_OR_RETURN(max, count(s, "maxItems", path));
    }
    if (max && *max < min) return bad(path, "item count range accepts no value");
    if (s.contains("uniqueItems") && s["uniqueItems"] == true && (!max || *max > 1)) {
      // Distinct items: over a finite item set, a subsequence of it; otherwise at most one item
      // (sound; arrays of two or more distinct items are never written).
      std::optional<std::vector<Json>> values;
      if (!s.contains("prefixItems") && s.contains("items")) values = finite_values(s["items"]);
      if (values) return unique_subsequence(*values, min, max, path);
      if (min > 1)
        return unsupported("uniqueItems", path,
                           "true with minItems above 1 and items that are not a finite set");
      max = 1;
    }
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

  template <typename P>
  static std::vector<bool> props_required(const std::vector<P>& props) {
    std::vector<bool> out;
    for (const P& p : props) out.push_back(p.required);
    return out;
  }

  // An object whose member count lies in [min_props, max_props]: the members in schema order,
  // each optional one taken or skipped, with the count so far in the rule (saturating at
  // min_props when there is no maximum), then the additional members. Exact; the rules grow
  // with members x count, so counts are limited to kMaxCount.
  StatusOr<Element> counted_object(const std::vector<bool>& required,
                                   const std::vector<Element>& members,
                                   const std::optional<Element>& extra_member, int64_t min_props,
                                   std::optional<int64_t> max_props, const std::string& path) {
    constexpr int64_t kMaxCount = 64;
    const int64_t cap = max_props ? *max_props : min_props;
    if (cap > kMaxCount)
      return unsupported(
          max_props ? "maxProperties" : "minProperties", path,
          "counts above " + std::to_string(kMaxCount) + " with optional or additional members");
    const int64_t n = static_cast<int64_t>(members.size());
    Element comma = jb_.rule_of({Sequence{jb_.ws(), jb_.lit(",", "c"), jb_.ws()}}, "comma");
    auto next = [&](int64_t c) -> std::optional<int64_t> {
      if (max_props) return c + 1 <= *max_props ? std::optional<int64_t>(c + 1) : std::nullopt;
      return std::min(c + 1, min_props);
    };
    std::map<std::pair<int64_t, int64_t>, std::optional<Element>> memo;
    // build(i, c): members i.. given c written (c == 0: at least one must follow).
    std::function<std::optional<Element>(int64_t, int64_t)> build = [&](int64_t i, int64_t c) {
      auto key = std::make_pair(i, c);
      if (auto it = memo.find(key); it != memo.end()) return it->second;
      std::optional<Element> out;
      if (i == n) {
        const int64_t need = std::max<int64_t>(0, min_props - c);
        std::optional<int64_t> most;
        if (max_props) most = *max_props - c;
        if (extra_member && c == 0 && (!most || *most >= 1)) {
          Element item = jb_.rule_of({Sequence{comma, *extra_member}}, "extra");
          out = jb_.rule_of(
              {Sequence{
                  *extra_member,
                  jb_.repeat(item, std::max<int64_t>(0, need - 1),
                             most ? std::optional<int64_t>(*most - 1) : std::nullopt, "extras")}},
              "extras");
        } else if (extra_member && c > 0 && (!most || *most >= need)) {
          Element item = jb_.rule_of({Sequence{comma, *extra_member}}, "extra");
          out = jb_.repeat(item, need, most, "extras");
        } else if (c > 0 && need == 0) {
          out = jb_.rule_of({Sequence{}}, "end");
        }
        return memo[key] = out;
      }
      Fragment alts;
      if (auto c1 = next(c)) {
        if (auto r = build(i + 1, *c1)) {
          alts.push_back(c > 0 ? Sequence{comma, members[i], *r} : Sequence{members[i], *r});
        }
      }
      if (!required[i])
        if (auto r = build(i + 1, c)) alts.push_back(Sequence{*r});
      if (!alts.empty()) out = jb_.rule_of(alts, "counted");
      return memo[key] = out;
    };
    int64_t n_required = std::count(required.begin(), required.end(), true);
    Element open = jb_.lit("{", "o"), close = jb_.lit("}", "c");
    Fragment alts;
    if (min_props == 0 && n_required == 0) alts.push_back(Sequence{open, jb_.ws(), close});
    if (auto b = build(0, 0)) alts.push_back(Sequence{open, jb_.ws(), *b, jb_.ws(), close});
    if (alts.empty()) return bad(path, "minProperties/maxProperties accept no object");
    return jb_.rule_of(alts, "object");
  }

  const Json& root_;
  JsonSchemaOptions options_;
  JsonBuilder jb_;
  std::map<std::string, uint32_t> ref_rules_;
  std::vector<std::string> ref_log_;  // ref_rules_ keys in the order they were added
  std::set<std::string> inlining_;    // $ref targets merged with siblings, being compiled
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
  // propertyNames: every member name must satisfy it. Listed names that do not are never
  // written; additional members get names from its `pattern` (full match, a subset of the
  // spec's search) when that is all it says, else there are none.
  const Json* names_schema = nullptr;
  if (s.contains("propertyNames")) {
    names_schema = &s["propertyNames"];
    for (int i = 0; i < 32 && names_schema->is_object() && names_schema->contains("$ref") &&
                    (*names_schema)["$ref"].is_string();
         ++i) {
      ASSIGN_OR_RETURN(names_schema, json_detail::resolve_ref(
                                         root_, (*names_schema)["$ref"].get<std::string>(), path));
    }
  }
  std::optional<std::string> name_regex;  // extra member names, when restricted
  bool names_closed = false;              // no additional members at all
  auto name_ok = [&](const std::string& name) -> StatusOr<bool> {
    if (!names_schema) return true;
    if (names_schema->is_boolean()) return names_schema->get<bool>();
    if (!names_schema->is_object()) return bad(path + "/propertyNames", "must be a schema");
    for (const auto& [k, v] : names_schema->items()) {
      if (json_detail::is_inert(k)) continue;
      if (k == "type") {
        ASSIGN_OR_RETURN(auto t, json_detail::type_set(v, path + "/propertyNames"));
        if (!t.count("string")) return false;
        continue;
      }
      if (k == "enum" || k == "const") {
        std::vector<Json> vals;
        if (k == "const") vals.push_back(v);
        if (k == "enum" && v.is_array()) vals.assign(v.begin(), v.end());
        if (json_detail::values_disjoint(vals, {Json(name)})) return false;
        continue;
      }
      std::optional<bool> h = keyword_holds(Json(name), k, *names_schema);
      if (!h) return unsupported("propertyNames", path, "'" + k + "' in it");
      if (!*h) return false;
    }
    return true;
  };
  if (names_schema) {
    bool pattern_only = names_schema->is_object();
    if (names_schema->is_object()) {
      for (const auto& [k, v] : names_schema->items())
        if (!json_detail::is_inert(k) && k != "pattern" && !(k == "type" && v == "string"))
          pattern_only = false;
    }
    if (names_schema->is_boolean() && names_schema->get<bool>()) {
      // true: no constraint
    } else if (pattern_only && names_schema->contains("pattern") &&
               (*names_schema)["pattern"].is_string()) {
      name_regex = (*names_schema)["pattern"].get<std::string>();
    } else if (!(pattern_only && !names_schema->contains("pattern"))) {
      names_closed = true;
    }
  }
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
      ASSIGN_OR_RETURN(bool ok_name, name_ok(name));
      if (!ok_name) {
        if (required.count(name))
          return bad(path, "propertyNames rejects required '" + name + "': accepts no value");
        continue;
      }
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
      ASSIGN_OR_RETURN(bool ok_name, name_ok(name));
      if (!ok_name)
        return bad(path, "propertyNames rejects required '" + name + "': accepts no value");
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
  // additionalProperties false with patternProperties: members named by a pattern are still
  // allowed; they are written with names from the first pattern our regex front end takes
  // (full match), taking every pattern's schema.
  if (extra_explicit_false && !patterns.empty() && !names_schema) {
    for (const auto& [p, sub] : s["patternProperties"].items()) {
      if (!parse_regex(p).ok()) continue;
      auto e =
          value(with_patterns(Json(true), nullptr), path + "/patternProperties", depth + 1, false);
      if (!e.ok()) break;
      extra = *e;
      name_regex = p;
      break;
    }
  }
  if (names_closed) extra.reset();
  size_t n_required = 0;
  for (const Prop& p : props) n_required += p.required;
  int64_t min_props = 0;
  std::optional<int64_t> max_props;
  if (s.contains("minProperties")) {
    ASSIGN_OR_RETURN(min_props, count(s, "minProperties", path));
  }
  if (s.contains("maxProperties")) {
    ASSIGN_OR_RETURN(max_props, count(s, "maxProperties", path));
  }
  if (max_props && (*max_props < static_cast<int64_t>(n_required) || *max_props < min_props))
    return bad(path, "maxProperties below the required members: accepts no value");
  // Counting is needed when the required members do not already meet minProperties, or when
  // more members than maxProperties could be written.
  const bool counting = min_props > static_cast<int64_t>(n_required) ||
                        (max_props && (extra || *max_props < static_cast<int64_t>(props.size())));
  Element comma = jb_.rule_of({Sequence{jb_.ws(), jb_.lit(",", "c"), jb_.ws()}}, "comma");
  Element colon = jb_.rule_of({Sequence{jb_.ws(), jb_.lit(":", "c"), jb_.ws()}}, "colon");
  std::vector<Element> members;
  for (const Prop& p : props) {
    std::string key = Json(p.name).dump(-1, ' ', false, Json::error_handler_t::strict);
    members.push_back(jb_.rule_of({Sequence{jb_.lit(key, "key"), colon, p.value}}, "member"));
  }
  std::optional<Element> extra_member;
  if (extra && name_regex) {
    // Such names must differ from every listed one: each listed name must be one the pattern
    // provably does not find.
    bool apart = parse_regex(*name_regex).ok();
    for (const std::string& n : names) {
      std::optional<bool> f = apart ? pattern_finds(*name_regex, Json(n)) : std::nullopt;
      apart = apart && f && !*f;
    }
    if (apart) {
      ASSIGN_OR_RETURN(Element body, jb_.regex(*name_regex, true, "keyname"));
      Element q = jb_.lit("\"", "q");
      Element key = jb_.rule_of({Sequence{q, body, q}}, "keyname");
      extra_member = jb_.rule_of({Sequence{key, colon, *extra}}, "extra");
    }
  } else if (extra) {
    extra_member = jb_.rule_of({Sequence{jb_.string_not_in(names), colon, *extra}}, "extra");
  }
  if (counting)
    return counted_object(props_required(props), members, extra_member, min_props, max_props, path);
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

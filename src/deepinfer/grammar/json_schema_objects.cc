// SchemaCompiler: objects (properties, required, additional and pattern properties, dependencies,
// propertyNames, member counts).
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "deepinfer/grammar/json_schema_compiler.h"
#include "deepinfer/grammar/regex_parser.h"

namespace deepinfer::grammar::json_detail {

StatusOr<Element> SchemaCompiler::counted_object(const std::vector<bool>& required,
                                                 const std::vector<Element>& members,
                                                 const std::optional<Element>& extra_member,
                                                 int64_t min_props,
                                                 std::optional<int64_t> max_props,
                                                 const std::string& path) {
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
  // Schema dependencies (`dependencies` with a schema, draft 4-7): "A present => the object
  // meets D". An optional A is never written (sound, not complete); a required A is refused.
  std::map<std::string, std::vector<std::string>> depends;
  std::set<std::string> schema_dependent;
  for (const char* key : {"dependentRequired", "dependencies"}) {
    if (!s.contains(key)) continue;
    if (!s[key].is_object()) return bad(path + "/" + key, "must be an object");
    for (const auto& [name, deps0] : s[key].items()) {
      const Json* dp = &deps0;
      if (deps0.is_object() && deps0.size() == 1 && deps0.contains("required"))
        dp = &deps0["required"];  // {required: [..]} is the array form
      const Json& deps = *dp;
      if (!deps.is_array()) {
        if (std::string(key) != "dependencies" || (!deps.is_object() && !deps.is_boolean()))
          return bad(path + "/" + key + "/" + name, "must be an array");
        if (deps != true) schema_dependent.insert(name);
        continue;
      }
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
  for (const std::string& name : schema_dependent) {
    if (required.count(name))
      return unsupported("dependencies", path, "schema dependencies of required '" + name + "'");
    never.insert(name);
  }
  // patternProperties: a listed name that a pattern matches takes that schema too; an
  // additional member takes every pattern's schema besides additionalProperties (whatever its
  // name matches, it then validates: sound, not complete).
  std::vector<std::pair<std::string, Json>> patterns;
  if (s.contains("patternProperties")) {
    if (!s["patternProperties"].is_object())
      return bad(path + "/patternProperties", "must be an object");
    for (const auto& [p, sub] : s["patternProperties"].items()) {
      try {
        std::regex(p, std::regex::ECMAScript);
      } catch (const std::regex_error&) {
        return unsupported("patternProperties", path, "pattern '" + p + "' is not supported");
      }
      patterns.emplace_back(p, sub);
    }
  }
  // A name takes a pattern's schema where the pattern finds it, or where that is not certain
  // (json_detail::ascii_pattern_finds): a stricter schema stays sound.
  auto with_patterns = [&](Json base, const std::string* name) {
    Json all = Json::array({std::move(base)});
    for (const auto& [p, sub] : patterns) {
      std::optional<bool> found;
      if (name) found = json_detail::ascii_pattern_finds(p, *name);
      if (name == nullptr || !found || *found) all.push_back(sub);
    }
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

}  // namespace deepinfer::grammar::json_detail

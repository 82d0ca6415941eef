#include "deepinfer/grammar/json_schema_keywords.h"

#include <map>
#include <set>
#include <string>

#include "deepinfer/grammar/json_schema_merge.h"

namespace deepinfer::grammar::json_detail {
namespace {

using Json = nlohmann::ordered_json;

// Every keyword of drafts 4, 6, 7, 2019-09 and 2020-12 (core, applicator, validation, meta-data,
// format, content).
const std::set<std::string>& keywords() {
  static const std::set<std::string> k = {"$schema",
                                          "$id",
                                          "$ref",
                                          "$anchor",
                                          "$dynamicRef",
                                          "$dynamicAnchor",
                                          "$recursiveRef",
                                          "$recursiveAnchor",
                                          "$vocabulary",
                                          "$comment",
                                          "$defs",
                                          "definitions",
                                          "allOf",
                                          "anyOf",
                                          "oneOf",
                                          "not",
                                          "if",
                                          "then",
                                          "else",
                                          "dependentSchemas",
                                          "dependencies",
                                          "prefixItems",
                                          "items",
                                          "additionalItems",
                                          "contains",
                                          "properties",
                                          "patternProperties",
                                          "additionalProperties",
                                          "propertyNames",
                                          "unevaluatedItems",
                                          "unevaluatedProperties",
                                          "type",
                                          "enum",
                                          "const",
                                          "multipleOf",
                                          "maximum",
                                          "exclusiveMaximum",
                                          "minimum",
                                          "exclusiveMinimum",
                                          "maxLength",
                                          "minLength",
                                          "pattern",
                                          "maxItems",
                                          "minItems",
                                          "uniqueItems",
                                          "maxContains",
                                          "minContains",
                                          "maxProperties",
                                          "minProperties",
                                          "required",
                                          "dependentRequired",
                                          "format",
                                          "contentEncoding",
                                          "contentMediaType",
                                          "contentSchema",
                                          "title",
                                          "description",
                                          "default",
                                          "deprecated",
                                          "readOnly",
                                          "writeOnly",
                                          "examples"};
  return k;
}

// Keywords whose value is one schema, an array of schemas, or an object of named schemas.
const std::set<std::string> kOneSchema = {"items",
                                          "additionalItems",
                                          "contains",
                                          "additionalProperties",
                                          "propertyNames",
                                          "not",
                                          "if",
                                          "then",
                                          "else",
                                          "unevaluatedItems",
                                          "unevaluatedProperties",
                                          "contentSchema"};
const std::set<std::string> kSchemaArrays = {"allOf", "anyOf", "oneOf", "prefixItems", "items"};
const std::set<std::string> kNamedSchemas = {"properties",  "patternProperties", "$defs",
                                             "definitions", "dependentSchemas",  "dependencies"};

// Older drafts' spellings in 2020-12's: a boolean exclusiveMinimum/Maximum (draft-04) makes
// minimum/maximum exclusive; an array `items` (drafts 4 to 2019-09) is `prefixItems`, and
// `additionalItems` then is `items`.
void modernize(Json& s) {
  for (const auto& [flag, bound] :
       {std::pair<const char*, const char*>{"exclusiveMinimum", "minimum"},
        {"exclusiveMaximum", "maximum"}}) {
    if (!s.contains(flag) || !s[flag].is_boolean()) continue;
    const bool exclusive = s[flag].get<bool>();
    s.erase(flag);
    if (exclusive && s.contains(bound)) {
      s[flag] = s[bound];
      s.erase(bound);
    }
  }
  if (s.contains("items") && s["items"].is_array() && !s.contains("prefixItems")) {
    s["prefixItems"] = std::move(s["items"]);
    s.erase("items");
    if (s.contains("additionalItems")) {
      s["items"] = std::move(s["additionalItems"]);
      s.erase("additionalItems");
    }
  }
}

// The draft that introduced a keyword (4 for those of draft 4 and older).
int introduced_in(const std::string& k) {
  static const std::map<std::string, int> later = {{"const", 6},
                                                   {"contains", 6},
                                                   {"propertyNames", 6},
                                                   {"examples", 6},
                                                   {"if", 7},
                                                   {"then", 7},
                                                   {"else", 7},
                                                   {"$comment", 7},
                                                   {"contentMediaType", 7},
                                                   {"contentEncoding", 7},
                                                   {"$defs", 2019},
                                                   {"$anchor", 2019},
                                                   {"$recursiveRef", 2019},
                                                   {"$recursiveAnchor", 2019},
                                                   {"$vocabulary", 2019},
                                                   {"dependentRequired", 2019},
                                                   {"dependentSchemas", 2019},
                                                   {"unevaluatedProperties", 2019},
                                                   {"unevaluatedItems", 2019},
                                                   {"minContains", 2019},
                                                   {"maxContains", 2019},
                                                   {"deprecated", 2019},
                                                   {"contentSchema", 2019},
                                                   {"prefixItems", 2020},
                                                   {"$dynamicRef", 2020},
                                                   {"$dynamicAnchor", 2020}};
  auto it = later.find(k);
  return it == later.end() ? 4 : it->second;
}

void strip(Json& s, int draft) {
  if (!s.is_object()) return;
  const bool draft4 = draft <= 4;
  // A keyword of a later draft means nothing under the schema's own draft (its validators ignore
  // it: `const` in a draft-04 schema constrains nothing, so a oneOf of consts there accepts no
  // value). Such members are dropped, except `$defs` and annotations, kept inert as $ref targets.
  Json held = Json::object();
  for (const auto& [k, v] : s.items())
    if (introduced_in(k) > draft) held[k] = v;
  for (const auto& [k, v] : held.items()) s.erase(k);
  modernize(s);
  Json out = Json::object();
  for (auto& [k, v] : held.items()) {
    if (k != "$defs" && !is_annotation(k)) continue;
    if (k == "$defs" && v.is_object())
      for (auto& [name, x] : v.items()) strip(x, draft);
    out[k] = std::move(v);
  }
  for (auto& [k, v] : s.items()) {
    const std::string key = draft4 && k == "id" ? "$id" : k;
    if (!keywords().count(key)) {
      // A $ref may point into any member ("#/definitions/a/full"): objects are kept, as
      // schemas, and every non-keyword is inert (is_inert).
      if (v.is_object()) {
        strip(v, draft);
        out[key] = std::move(v);
      }
      continue;
    }
    if (kOneSchema.count(key) && v.is_object()) strip(v, draft);
    if (kSchemaArrays.count(key) && v.is_array())
      for (Json& x : v) strip(x, draft);
    if (kNamedSchemas.count(key) && v.is_object())
      for (auto& [name, x] : v.items()) strip(x, draft);  // dependencies' arrays stay as they are
    out[key] = std::move(v);
  }
  s = std::move(out);
}

void walk(const Json& s, const std::string& path,
          const std::function<void(const Json&, const std::string&)>& f) {
  if (!s.is_object()) return;
  f(s, path);
  for (const auto& [k, v] : s.items()) {
    const std::string at = path + "/" + pointer_escape(k);
    if (kOneSchema.count(k) && v.is_object()) walk(v, at, f);
    if (kSchemaArrays.count(k) && v.is_array())
      for (size_t i = 0; i < v.size(); ++i) walk(v[i], at + "/" + std::to_string(i), f);
    if (kNamedSchemas.count(k) && v.is_object())
      for (const auto& [name, x] : v.items()) walk(x, at + "/" + pointer_escape(name), f);
  }
}

}  // namespace

bool is_keyword(const std::string& k) { return keywords().count(k) > 0; }

void for_each_schema(const Json& root,
                     const std::function<void(const Json&, const std::string&)>& f) {
  walk(root, "", f);
}

Json strip_non_keywords(const Json& root) {
  Json out = root;
  int draft = 2020;  // no $schema: the latest
  if (root.is_object() && root.contains("$schema") && root["$schema"].is_string()) {
    const std::string d = root["$schema"].get<std::string>();
    for (const auto& [tag, n] : {std::pair<const char*, int>{"draft-03", 4},
                                 {"draft-04", 4},
                                 {"draft-06", 6},
                                 {"draft-07", 7},
                                 {"2019-09", 2019}})
      if (d.find(tag) != std::string::npos) draft = n;
  }
  strip(out, draft);
  return out;
}

}  // namespace deepinfer::grammar::json_detail

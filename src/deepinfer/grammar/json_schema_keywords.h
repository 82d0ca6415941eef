// The JSON Schema vocabulary (drafts 4 to 2020-12), so that a schema's non-keywords are told
// apart from keywords the compiler does not support.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace deepinfer::grammar::json_detail {

// A copy of the schema document without the non-object members of its schema objects that are no
// JSON Schema keyword at all (`self`, `x-kubernetes-*`, vendor or misspelt keys): the specification
// says to ignore them, and the compiler then refuses only keywords it does not support. Object
// members that are no keyword stay (stripped the same way), since a $ref may point into them;
// they constrain nothing (is_inert). Under
// draft-04 (`$schema` naming it) `id` is that draft's `$id`. Older drafts' forms become 2020-12's:
// a boolean exclusiveMinimum/Maximum makes minimum/maximum exclusive, an array `items` is
// `prefixItems` (with `additionalItems` as `items`). Property names, `$defs` names and
// enum/const values are data, not keywords, and are kept whatever they are called.
nlohmann::ordered_json strip_non_keywords(const nlohmann::ordered_json& root);

// A keyword of some draft (members that are not are ignored: strip_non_keywords).
bool is_keyword(const std::string& key);

// Calls f on every schema object of the document (the root, and every subschema reachable
// through schema-valued keywords), with its JSON pointer ("" for the root).
void for_each_schema(
    const nlohmann::ordered_json& root,
    const std::function<void(const nlohmann::ordered_json& schema, const std::string& path)>& f);

}  // namespace deepinfer::grammar::json_detail

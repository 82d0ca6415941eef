// Schema-level analysis for the JSON Schema front end: keyword checks, $ref resolution, allOf
// merging and the oneOf disjointness test. Works on schema documents, not on grammars.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "deepinfer/base/status.h"

namespace deepinfer::grammar::json_detail {

using Json = nlohmann::ordered_json;

// Annotation keywords, which do not constrain values and are ignored.
bool is_annotation(const std::string& keyword);
// Every keyword is either handled or an annotation; anything else is `unimplemented` naming the
// keyword and path. `$id` is only accepted at the root (elsewhere it would rebase `$ref`s).
Status check_keywords(const Json& schema, const std::string& path, bool at_root);
// The keywords of one schema object that check_keywords refuses, in order.
std::vector<std::string> unsupported_keywords(const Json& schema, bool at_root);
std::string pointer_escape(const std::string& name);

// A local reference ("#", "#/$defs/x", any JSON pointer into the document).
StatusOr<const Json*> resolve_ref(const Json& root, const std::string& ref,
                                  const std::string& path);

StatusOr<std::set<std::string>> type_set(const Json& type, const std::string& path);
bool value_has_type(const Json& v, const std::set<std::string>& types);

// One schema equivalent to `schema` (which holds allOf), or an error for what cannot be merged
// soundly: differing values of the same keyword (except required, properties, type, enum and
// the numeric/length bounds), or additionalProperties that would reject another part's property.
StatusOr<Json> merge_all_of(const Json& root, const Json& schema, const std::string& path);

// True only when no JSON value can satisfy both schemas (checked with the spec's semantics,
// independent of strict mode): disjoint types, disjoint enum/const values, an object
// discriminator with disjoint const/enum values, or a required key the other forbids.
bool provably_disjoint(const Json& root, const Json& a, const Json& b, bool strict);

}  // namespace deepinfer::grammar::json_detail

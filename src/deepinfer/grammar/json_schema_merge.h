// Schema-level analysis for the JSON Schema front end: keyword checks, $ref resolution, allOf
// merging (json_schema_merge.cc) and the oneOf disjointness test (json_schema_disjoint.cc).
// Works on schema documents, not on grammars.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::grammar::json_detail {

using Json = nlohmann::ordered_json;

// A member the compiler adds to a narrowed oneOf branch (no keyword, so inert everywhere else):
// the strings listed in it are not written (JsonBuilder::string_not_in).
inline constexpr const char* kNotInKey = "$deepinfer:string-not-in";
// Patterns a string must not match anywhere (`not: {pattern}` beside a string schema), added by
// the compiler where it negates (inert likewise).
inline constexpr const char* kNotPatternKey = "$deepinfer:string-not-pattern";

// Annotation keywords, which do not constrain values and are ignored.
bool is_annotation(const std::string& keyword);
// Annotations, `$defs`/`definitions` (only $ref targets) and `$id` (checked by check_keywords):
// keywords that do not constrain the value of the schema object holding them.
bool is_inert(const std::string& keyword);
// Every keyword is either handled or an annotation; anything else is `unimplemented` naming the
// keyword and path. `$id` is accepted at the root, and elsewhere only as a bare fragment
// ("#/properties/x", "#name"), which does not change the base URI; any other `$id` would rebase
// the `$ref`s beneath it.
Status check_keywords(const Json& schema, const std::string& path, bool at_root);
// The keywords of one schema object that check_keywords refuses, in order.
std::vector<std::string> unsupported_keywords(const Json& schema, bool at_root);
std::string pointer_escape(const std::string& name);

// A local reference ("#", "#/$defs/x", any JSON pointer into the document).
StatusOr<const Json*> resolve_ref(const Json& root, const std::string& ref,
                                  const std::string& path);
// s with its top-level $refs followed; nullptr where they do not resolve, chain past 32, or
// have a keyword beside them.
const Json* resolved(const Json& root, const Json& s);

StatusOr<std::set<std::string>> type_set(const Json& type, const std::string& path);
bool value_has_type(const Json& v, const std::set<std::string>& types);
// The types both sets allow (number and integer meet in integer).
std::set<std::string> intersect_types(const std::set<std::string>& a,
                                      const std::set<std::string>& b);

// A sound stand-in for if/then/else (every value it accepts satisfies the conditional, whatever
// `if` says): `then` alone when there is no else (a value valid under `then` passes either way);
// `if` or `else` when there is no then; with both, (`if` and `then`) or (`then` and `else`).
// nullopt when the keywords impose nothing (no `if`, or `if` alone). Not complete: a value that
// fails `if` and `then` but satisfies `else` is never written.
std::optional<Json> conditional_approximation(const Json& schema);

// One schema equivalent to `schema` (which holds allOf), or an error for what cannot be merged
// soundly: differing values of the same keyword (except required, properties, type, enum and
// the numeric/length bounds), or additionalProperties that would reject another part's property.
StatusOr<Json> merge_all_of(const Json& root, const Json& schema, const std::string& path);

// The oneOf disjointness test (json_schema_disjoint.cc).

// No value of a equals (as JSON) a value of b.
bool values_disjoint(const std::vector<Json>& a, const std::vector<Json>& b);
// True only when no JSON value can satisfy both schemas (the spec's semantics): disjoint types,
// disjoint enum/const values, a property required by one whose schemas are provably disjoint
// (recursively: a discriminator with disjoint const/enum values), or a required key the other
// forbids.
bool provably_disjoint(const Json& root, const Json& a, const Json& b);
// Whether pattern p finds a match in s as the validators' (Python) re would, where
// std::regex is certain to agree: s printable ASCII and p free of syntax they read
// differently; nullopt otherwise.
std::optional<bool> ascii_pattern_finds(const std::string& p, const std::string& s);
// b rejects every object with member k: additionalProperties false, k not listed, and no
// pattern of patternProperties finds k (checked where std::regex is certain, else false).
bool name_forbidden(const Json& b, const std::string& k);

// True only when no value the compiler writes for schema `a` (merged, with strict mode as given)
// satisfies schema `b`: provably_disjoint, or `a` writes only objects and `b` requires a key that
// the compiled `a` never writes (a closed object without that property; in strict mode an object
// that lists properties and has no additionalProperties is closed).
bool output_excludes(const Json& root, const Json& a, const Json& b, bool strict);

}  // namespace deepinfer::grammar::json_detail

// The JSON Schema compiler's walk over a schema document (internal to the grammar module).
// One class, its members defined by concern: json_schema.cc (entry, $ref, dispatch),
// json_schema_not.cc, json_schema_one_of.cc (anyOf/oneOf), json_schema_values.cc (enum/const),
// json_schema_scalars.cc (numbers, strings), json_schema_arrays.cc, json_schema_objects.cc.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/grammar/grammar.h"
#include "deepinfer/grammar/json_schema.h"
#include "deepinfer/grammar/json_schema_builder.h"
#include "deepinfer/grammar/json_schema_merge.h"

namespace deepinfer::grammar::json_detail {

inline constexpr int kMaxSchemaDepth = 256;

inline const std::set<std::string>& type_names() {
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

  StatusOr<Grammar> compile();

 private:
  using Fragment = GrammarBuilder::Fragment;

  // Drops every alternative that uses a rule deriving no string (a $ref whose target failed
  // after a recursive use of it, a branch left without alternatives), so that no prefix leads
  // the matcher into a dead end. False when the root itself derives nothing.
  static bool prune_unproductive(Grammar* g);

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
  StatusOr<Element> value(const Json& s, const std::string& path, int depth, bool at_root);

  StatusOr<Element> value_unchecked(const Json& s, const std::string& path, int depth,
                                    bool at_root);

  bool siblings_ignored_beside_ref() const;

  // A schema made by merging (allOf, siblings of $ref or of a union branch): one rule per
  // distinct merged text, made before its body, so that a merge that recurs through its own
  // references (a branch {$ref: "#"} beside sibling keywords) reuses the rule instead of being
  // inlined again without end.
  StatusOr<Element> value_memo(const Json& merged, const std::string& path, int depth);

  StatusOr<Element> ref(const Json& s, const std::string& path, int depth);

  // Narrows `out` so that no value it accepts satisfies `n` (what `not: n` beside it means),
  // for the forms of `n` that have such a narrowing: types; `required` (the value must be an
  // object without one of the names: the first that `out` does not require becomes `false`);
  // `anyOf` of those (each negated in turn); enum/const values, struck from `out`'s enum.
  Status negate_into(Json* out, const Json& n0, const std::string& path, int depth);

  // An equivalent schema without top-level $ref/allOf (merged), or s itself when that fails.
  Json flattened(const Json& s, const std::string& path);

  // Makes *a require a property whose schemas in a and b are provably disjoint (an optional
  // discriminator such as `type: {const: X}`), so that its output fails b. False when none.
  bool require_discriminator(Json* a, const Json& b0, const std::string& path);
  // Narrows a to objects that carry a member a lists and b forbids (json_detail::
  // name_forbidden): b rejects them all.
  bool require_forbidden_member(Json* a, const Json& b0, const std::string& path);

  // The values member p may take in an object valid under s (whatever s says of other types),
  // where s pins p to a finite set: `properties/p` with enum/const, through $ref, any allOf part,
  // or every anyOf/oneOf branch (their union). nullopt otherwise.
  std::optional<std::vector<Json>> pinned_values(const Json& s0, const std::string& p, int depth);

  // Narrows *a to objects that require a member p which both a and b pin to disjoint value sets;
  // then everything written for a is an object whose p b never accepts. True when done.
  bool require_pinned_discriminator(Json* a, const Json& b, const std::string& path);

  // Makes *a (a merged oneOf branch) never write one member that b requires and a does not,
  // as `properties: {name: false}`. False when there is none.
  bool exclude_required_of(Json* a, const Json& b0, const std::string& path);

  // Makes *a (a merged oneOf branch that writes plain strings) never write the strings of b's
  // finite value set (json_detail::kNotInKey). False when b has none or a is not such a branch.
  bool exclude_values_of(Json* a, const Json& b0, const std::string& path);

  StatusOr<Element> union_of(const Json& s, const std::string& path, int depth);

  // Whether value v satisfies keyword k of s: a keyword of another instance type always holds;
  // a few are checked; nullopt for the rest (the caller refuses).
  static std::optional<bool> keyword_holds(const Json& v, const std::string& k, const Json& s);

  // Whether pattern p finds a match in string v (the spec's unanchored search), where that is
  // certain: std::regex agrees with ECMA-262 and Python's re on printable ASCII text.
  static std::optional<bool> pattern_finds(const std::string& p, const Json& v);

  StatusOr<Element> enumeration(const Json& s, const std::string& path);

  // A fixed JSON value: scalars in canonical form (minimal escapes, raw UTF-8, nlohmann's
  // number text); arrays and objects with the usual whitespace gaps, members in stored order.
  Element literal_value(const Json& v);

  // Only annotations (or nothing): every value is valid.
  static bool unconstrained(const Json& s);

  StatusOr<Element> typed(const Json& s, const std::string& path, int depth);

  StatusOr<Element> typed_one(const Json& s, const std::string& t, const std::string& path,
                              int depth);

  // A numeric keyword as an integral int64 bound, rounded toward the allowed side for integer
  // schemas; error when it is not representable.
  StatusOr<std::optional<int64_t>> bound(const Json& s, const char* key, bool integer, bool lower,
                                         const std::string& path, bool* exclusive);

  // Integers that are multiples of k: "0", or -?[1-9][0-9]* tracked digit by digit through the k
  // residues (rule r: the digits so far are r mod k), ending only at residue 0.
  Element multiples_of(int64_t k);

  StatusOr<Element> number(const Json& s, bool integer, const std::string& path);

  // A non-negative count keyword; huge values are clamped (no output gets that long).
  StatusOr<int64_t> count(const Json& s, const char* key, const std::string& path);

  StatusOr<Element> string(const Json& s, const std::string& path);

  // The finite set of values a schema accepts (enum/const filtered by type, boolean, null), in
  // schema order and without JSON-equal repeats; nullopt when it is not such a schema.
  std::optional<std::vector<Json>> finite_values(const Json& s0);

  // uniqueItems over a finite item set: the items are distinct values written in the order of
  // the set (each at most once), between min and max of them. Exact as to which arrays of
  // distinct values pass, but only one order of them is written.
  StatusOr<Element> unique_subsequence(const std::vector<Json>& values, int64_t min,
                                       std::optional<int64_t> max, const std::string& path);

  StatusOr<Element> array(const Json& s, const std::string& path, int depth);

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
                                   std::optional<int64_t> max_props, const std::string& path);

  const Json& root_;
  JsonSchemaOptions options_;
  JsonBuilder jb_;
  std::map<std::string, uint32_t> ref_rules_;
  std::vector<std::string> ref_log_;  // ref_rules_ keys in the order they were added
  std::set<std::string> inlining_;    // $ref targets merged with siblings, being compiled
};

}  // namespace deepinfer::grammar::json_detail

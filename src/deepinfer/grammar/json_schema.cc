#include "deepinfer/grammar/json_schema.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "deepinfer/grammar/json_schema_builder.h"
#include "deepinfer/grammar/json_schema_compiler.h"
#include "deepinfer/grammar/json_schema_keywords.h"
#include "deepinfer/grammar/json_schema_merge.h"

namespace deepinfer::grammar {
namespace json_detail {

StatusOr<Grammar> SchemaCompiler::compile() {
  if (root_.is_object() && root_.contains("$id") && !root_["$id"].is_string()) {
    return invalid_argument("json schema: '$id' at root must be a string");
  }
  ASSIGN_OR_RETURN(Element e, value(root_, "", 0, true));
  Grammar g = std::move(jb_).finish(e);
  if (!prune_unproductive(&g)) return bad("", "schema accepts no value");
  RETURN_IF_ERROR(check_grammar_size(g, /*expanded=*/false, "json schema: the schema"));
  return g;
}

bool SchemaCompiler::prune_unproductive(Grammar* g) {
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
    alts.erase(
        std::remove_if(alts.begin(), alts.end(), [&](const Sequence& seq) { return !alt_ok(seq); }),
        alts.end());
  }
  return productive[g->root];
}

StatusOr<Element> SchemaCompiler::value(const Json& s, const std::string& path, int depth,
                                        bool at_root) {
  ASSIGN_OR_RETURN(Element e, value_unchecked(s, path, depth, at_root));
  if (jb_.b().too_large())
    return grammar_size_error("json schema at " + (path.empty() ? "/" : path) + ": the schema",
                              false);
  return e;
}

StatusOr<Element> SchemaCompiler::value_unchecked(const Json& s, const std::string& path, int depth,
                                                  bool at_root) {
  if (depth > kMaxSchemaDepth) return bad(path, "schema nested too deeply");
  if (s.is_boolean()) {
    if (s.get<bool>()) return jb_.any_value();
    return bad(path, "schema 'false' accepts no value");
  }
  if (!s.is_object()) return bad(path, "a schema must be an object or a boolean");
  RETURN_IF_ERROR(json_detail::check_keywords(s, path, at_root));
  if (s.contains("$ref")) return ref(s, path, depth);
  if (s.contains("allOf") || s.contains("unevaluatedProperties")) {
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

bool SchemaCompiler::siblings_ignored_beside_ref() const {
  if (!root_.is_object() || !root_.contains("$schema") || !root_["$schema"].is_string())
    return false;
  const std::string d = root_["$schema"].get<std::string>();
  for (const char* old : {"draft-03", "draft-04", "draft-06", "draft-07"})
    if (d.find(old) != std::string::npos) return true;
  return false;
}

StatusOr<Element> SchemaCompiler::value_memo(const Json& merged, const std::string& path,
                                             int depth) {
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

StatusOr<Element> SchemaCompiler::ref(const Json& s, const std::string& path, int depth) {
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

}  // namespace json_detail

StatusOr<Grammar> compile_json_schema(const nlohmann::ordered_json& schema,
                                      const JsonSchemaOptions& options) {
  if (options.max_whitespace < 0 || options.max_whitespace > 1024) {
    return invalid_argument("json schema: max_whitespace must be in [0, 1024]");
  }
  // nlohmann throws (e.g. on strings that are not UTF-8); exceptions stay inside the module.
  try {
    const nlohmann::ordered_json keywords_only = json_detail::strip_non_keywords(schema);
    json_detail::SchemaCompiler c(keywords_only, options);
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
  json_detail::JsonBuilder jb(options.max_whitespace,
                              options.whitespace == JsonWhitespace::kFlexible);
  Element o = jb.any_object();
  return std::move(jb).finish(o);
}

Grammar json_value_grammar(const JsonSchemaOptions& options) {
  json_detail::JsonBuilder jb(options.max_whitespace,
                              options.whitespace == JsonWhitespace::kFlexible);
  Element v = jb.any_value();
  return std::move(jb).finish(v);
}

}  // namespace deepinfer::grammar

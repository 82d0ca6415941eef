// JSON Schema and json_object front ends, compiled into the byte grammar IR. The supported
// subset, the defaults and what is rejected are listed in README.md ("JSON Schema").
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/grammar/grammar.h"

namespace deepinfer::grammar {

// Each gap between tokens inside objects and arrays. kBounded: nothing, one space, or one newline
// and an indent of up to max_whitespace spaces or tabs, so a weak model cannot spend its
// max_tokens on blank lines. kFlexible: up to max_whitespace bytes of [ \t\n\r].
enum class JsonWhitespace { kBounded, kFlexible };

struct JsonSchemaOptions {
  // 0 means compact output (no whitespace at all).
  int max_whitespace = 16;
  JsonWhitespace whitespace = JsonWhitespace::kBounded;
  // Absent `additionalProperties` means false, and `prefixItems` without `items` means no
  // further items (OpenAI strict mode). With false, both mean "anything", as the spec says.
  bool strict = true;
};

// Object properties are emitted in the order of the schema's `properties` object. Use this
// overload (or the text one) to keep the order written in the schema.
StatusOr<Grammar> compile_json_schema(const nlohmann::ordered_json& schema,
                                      const JsonSchemaOptions& options = {});
// nlohmann::json keeps object keys sorted, so properties come in lexicographic order.
StatusOr<Grammar> compile_json_schema(const nlohmann::json& schema,
                                      const JsonSchemaOptions& options = {});
// Parses the schema text (invalid JSON is invalid_argument), keeping property order.
StatusOr<Grammar> compile_json_schema_text(std::string_view schema_text,
                                           const JsonSchemaOptions& options = {});

// OpenAI `json_object`: any JSON object (members of any JSON value).
Grammar json_object_grammar(const JsonSchemaOptions& options = {});
// Any JSON value (what the schema `true` or `{}` accepts).
Grammar json_value_grammar(const JsonSchemaOptions& options = {});

}  // namespace deepinfer::grammar

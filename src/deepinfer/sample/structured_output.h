// The structured-output request of a sample (`so_args`, DeepSeek's name for it): which grammar
// the output must follow. This module only carries and parses it; grammar/ compiles it and the
// engine applies the token mask.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "deepinfer/base/status.h"

namespace deepinfer::sample {

struct StructuredOutput {
  enum class Kind { kRegex, kJsonSchema, kEbnf, kJsonObject };
  Kind kind = Kind::kJsonObject;
  // Regex pattern, EBNF text (root rule `root`), or the JSON Schema as JSON text (property
  // order as written); empty for json_object.
  std::string spec;
  bool operator==(const StructuredOutput&) const = default;
};

// so_args is an object with exactly one of {"regex": str}, {"json_schema": object | bool |
// str (schema text)}, {"ebnf": str}, {"json_object": true}. Errors name `so_args.<key>`.
StatusOr<StructuredOutput> structured_output_from_json(const nlohmann::ordered_json& j);
StatusOr<StructuredOutput> structured_output_from_json(const nlohmann::json& j);

// "regex" | "json_schema" | "ebnf" | "json_object".
const char* kind_name(StructuredOutput::Kind k);

}  // namespace deepinfer::sample

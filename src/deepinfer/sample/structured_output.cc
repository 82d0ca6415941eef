#include "deepinfer/sample/structured_output.h"

#include <nlohmann/json.hpp>

namespace deepinfer::sample {
namespace {

template <typename Json>
StatusOr<StructuredOutput> parse(const Json& j) {
  if (!j.is_object()) {
    return invalid_argument(std::string("so_args must be an object with one of regex, "
                                        "json_schema, ebnf, json_object; got ") +
                            j.type_name());
  }
  StructuredOutput so;
  int found = 0;
  for (const auto& [key, v] : j.items()) {
    const std::string field = "so_args." + key;
    if (key == "regex" || key == "ebnf") {
      if (!v.is_string())
        return invalid_argument(field + " must be a string, got " + v.type_name());
      so.kind = key == "regex" ? StructuredOutput::Kind::kRegex : StructuredOutput::Kind::kEbnf;
      so.spec = v.template get<std::string>();
    } else if (key == "json_schema") {
      if (v.is_string()) {
        so.spec = v.template get<std::string>();
      } else if (v.is_object() || v.is_boolean()) {
        so.spec = v.dump();
      } else {
        return invalid_argument(field + " must be a schema object, a boolean or schema text, got " +
                                v.type_name());
      }
      so.kind = StructuredOutput::Kind::kJsonSchema;
    } else if (key == "json_object") {
      if (!v.is_boolean() || !v.template get<bool>()) {
        return invalid_argument(field + " must be true");
      }
      so.kind = StructuredOutput::Kind::kJsonObject;
      so.spec.clear();
    } else {
      return invalid_argument("so_args has unknown key '" + key +
                              "' (expected regex, json_schema, ebnf or json_object)");
    }
    ++found;
  }
  if (found != 1) {
    return invalid_argument(
        "so_args must have exactly one of regex, json_schema, ebnf, "
        "json_object; got " +
        std::to_string(found));
  }
  return so;
}

}  // namespace

StatusOr<StructuredOutput> structured_output_from_json(const nlohmann::ordered_json& j) {
  return parse(j);
}
StatusOr<StructuredOutput> structured_output_from_json(const nlohmann::json& j) { return parse(j); }

const char* kind_name(StructuredOutput::Kind k) {
  switch (k) {
    case StructuredOutput::Kind::kRegex:
      return "regex";
    case StructuredOutput::Kind::kJsonSchema:
      return "json_schema";
    case StructuredOutput::Kind::kEbnf:
      return "ebnf";
    case StructuredOutput::Kind::kJsonObject:
      return "json_object";
  }
  return "?";
}

}  // namespace deepinfer::sample

// Forced tool calls (OpenAI tool_choice "required" or a named function) as an EBNF grammar for
// the engine's structured output (so_args {"ebnf": ...}), as vLLM forces them with a JSON
// grammar. The grammar covers the whole completion of a chat-mode turn: the DSML calls block
// exactly as the encoder writes it (§3.4), with each parameter value checked against the tool's
// JSON Schema where EBNF text can say it. What is and is not enforced: recipe/README.md.
#pragma once

#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/recipe/markers.h"
#include "deepinfer/recipe/python_json.h"

namespace deepinfer::recipe {

struct ToolCallGrammarOptions {
  // Empty: any offered tool ("required"). Otherwise only this function, called exactly once.
  std::string function;
  // false: exactly one call (OpenAI's parallel_tool_calls); true: one or more.
  bool parallel_tool_calls = true;
  Variant variant = Variant::kV41;
};

// `tools` is the request's OpenAI tools array ([{"type": "function", "function": {name,
// parameters}}]). The grammar's start rule is `root`. Errors are invalid_argument naming the
// field: "tools[1].function.name ...", or "tool_choice.function.name ..." for a function that
// is not offered.
StatusOr<std::string> tool_call_grammar(const Json& tools, const ToolCallGrammarOptions& options);

}  // namespace deepinfer::recipe

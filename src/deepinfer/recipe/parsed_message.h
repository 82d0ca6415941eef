// What a completion parses into: OpenAI-shaped assistant message parts.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "deepinfer/recipe/python_json.h"

namespace deepinfer::recipe {

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text
  bool operator==(const ToolCall&) const = default;
};

struct ParsedMessage {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCall> tool_calls;
  bool operator==(const ParsedMessage&) const = default;
};

// {"role": "assistant", "reasoning_content", "content", "tool_calls": [{"type": "function",
// "function": {"name", "arguments"}}]}
Json to_json(const ParsedMessage& m);

// For test failure messages.
inline void PrintTo(const ParsedMessage& m, std::ostream* os) { *os << to_json(m).dump(); }

}  // namespace deepinfer::recipe

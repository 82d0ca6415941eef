// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it, which is what
// DeepSeek's encoder puts into prompts (", " / ": " separators, float repr, raw non-ASCII).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace deepinfer::recipe {

using Json = nlohmann::ordered_json;

void python_json_dump(const Json& value, std::string* out);
inline std::string python_json_dumps(const Json& value) {
  std::string s;
  python_json_dump(value, &s);
  return s;
}
// json.dumps of a single string.
void python_json_quote(std::string_view s, std::string* out);
// repr(float), e.g. 3.0, 1.5e-07, 1e+21.
std::string python_float_repr(double v);

// json.loads; false (no exception) when text is not JSON.
bool python_json_loads(std::string_view text, Json* out);

}  // namespace deepinfer::recipe

#include "deepinfer/router/route_info.h"

#include <nlohmann/json.hpp>

namespace deepinfer::router {

namespace {

using json = nlohmann::json;

// nlohmann's parser recurses once per level; the server refuses bodies past 512 levels and so
// does this scan (strings and escapes honoured) before parsing.
bool too_deep(std::string_view body) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > 512) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

void append_content(const json& content, std::string& out) {
  if (content.is_string()) {
    out += content.get_ref<const std::string&>();
  } else if (content.is_array()) {
    for (const auto& part : content)
      if (part.is_object() && part.contains("text") && part["text"].is_string())
        out += part["text"].get_ref<const std::string&>();
  }
}

void append_prompt(const json& prompt, std::string& out) {
  if (prompt.is_string()) {
    out += prompt.get_ref<const std::string&>();
  } else if (prompt.is_array() && !prompt.empty()) {
    if (prompt[0].is_number_integer()) {  // token ids: one prompt
      for (const auto& id : prompt) out += id.dump() + ",";
    } else {
      append_prompt(prompt[0], out);  // batched: the first prompt decides
    }
  }
}

}  // namespace

RouteInfo route_info(std::string_view body) {
  RouteInfo info;
  json j = too_deep(body) ? json() : json::parse(body, nullptr, false);
  if (!j.is_object()) {
    info.text = std::string(body);
    return info;
  }
  info.stream = j.contains("stream") && j["stream"].is_boolean() && j["stream"].get<bool>();
  if (j.contains("messages") && j["messages"].is_array()) {
    for (const auto& m : j["messages"]) {
      if (!m.is_object()) continue;
      if (m.contains("role") && m["role"].is_string())
        info.text += m["role"].get_ref<const std::string&>() + "\n";
      if (m.contains("content")) append_content(m["content"], info.text);
      info.text += "\n";
    }
  } else if (j.contains("prompt")) {
    append_prompt(j["prompt"], info.text);
  }
  return info;
}

}  // namespace deepinfer::router

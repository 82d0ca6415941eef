// §2 of chat_recipe.md: the serving-layer mapping from an OpenAI request to encoder input.
#include <set>

#include "deepinfer/recipe/chat_encoder.h"

namespace deepinfer::recipe {
namespace {

// Python truthiness, since the reference tests `if kwargs.get("thinking")`.
bool truthy(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return false;
    case Json::value_t::boolean:
      return v.get<bool>();
    case Json::value_t::number_integer:
      return v.get<int64_t>() != 0;
    case Json::value_t::number_unsigned:
      return v.get<uint64_t>() != 0;
    case Json::value_t::number_float:
      return v.get<double>() != 0.0;
    case Json::value_t::string:
      return !v.get_ref<const std::string&>().empty();
    default:
      return !v.empty();
  }
}

std::string type_name(const Json& v) { return v.type_name(); }

// List content -> text: text parts joined by a blank line, images as the IMAGE marker (their
// offsets go to `image_offsets`).
Status flatten_content(Json* content, const std::string& where, Json* image_offsets) {
  if (content->is_null() || content->is_string()) return ok_status();
  if (!content->is_array())
    return invalid_argument(where + ": expected a string, an array of parts or null, got " +
                            type_name(*content));
  std::string out;
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    std::string pw = where + "[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return invalid_argument(pw + ": expected an object with a string 'type'");
    std::string t = part["type"];
    if (i) out += "\n\n";
    if (t == "text") {
      if (!part.contains("text") || !part["text"].is_string())
        return invalid_argument(pw + ".text: expected a string");
      out += part["text"].get<std::string>();
    } else if (t == "image_url" || t == "image") {
      image_offsets->push_back(out.size());
      out += kImage;
    } else {
      return invalid_argument(pw + ".type: unsupported content part type '" + t + "'");
    }
  }
  *content = out;
  return ok_status();
}

Status check_tool_calls(const Json& calls, const std::string& where) {
  if (calls.is_null()) return ok_status();
  if (!calls.is_array()) return invalid_argument(where + ": expected an array");
  for (size_t i = 0; i < calls.size(); ++i) {
    std::string w = where + "[" + std::to_string(i) + "]";
    const Json& c = calls[i];
    if (!c.is_object()) return invalid_argument(w + ": expected an object");
    if (!c.contains("function") || !c["function"].is_object())
      return invalid_argument(w + ".function: expected an object");
    const Json& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string())
      return invalid_argument(w + ".function.name: expected a string");
    if (f.contains("arguments") && !f["arguments"].is_string() && !f["arguments"].is_object())
      return invalid_argument(w + ".function.arguments: expected a JSON string or an object");
    if (c.contains("id") && !c["id"].is_string() && !c["id"].is_null())
      return invalid_argument(w + ".id: expected a string");
  }
  return ok_status();
}

Status check_tools(const Json& tools, const std::string& where) {
  if (!tools.is_array()) return invalid_argument(where + ": expected an array");
  for (size_t i = 0; i < tools.size(); ++i) {
    std::string w = where + "[" + std::to_string(i) + "]";
    const Json& t = tools[i];
    if (!t.is_object()) return invalid_argument(w + ": expected an object");
    if (t.contains("type") && t["type"] != "function")
      return invalid_argument(w + ".type: only 'function' tools are supported");
    if (!t.contains("function") || !t["function"].is_object())
      return invalid_argument(w + ".function: expected an object");
    if (!t["function"].contains("name") || !t["function"]["name"].is_string())
      return invalid_argument(w + ".function.name: expected a string");
  }
  return ok_status();
}

StatusOr<EncoderInput> map_request_impl(const Json& request, Variant variant) {
  if (!request.is_object()) return invalid_argument("request: expected a JSON object");
  EncoderInput in;
  EncodeOptions& o = in.options;
  o.variant = variant;

  Json kwargs = Json::object();
  if (request.contains("chat_template_kwargs") && !request["chat_template_kwargs"].is_null()) {
    kwargs = request["chat_template_kwargs"];
    if (!kwargs.is_object()) return invalid_argument("chat_template_kwargs: expected an object");
  }

  // Thinking is on unless the request says otherwise (vLLM's default).
  o.thinking = true;
  if (kwargs.contains("thinking") || kwargs.contains("enable_thinking"))
    o.thinking =
        truthy(kwargs.value("thinking", Json())) || truthy(kwargs.value("enable_thinking", Json()));

  Json effort;
  std::string effort_field = "reasoning_effort";
  if (request.contains("reasoning_effort") && !request["reasoning_effort"].is_null()) {
    effort = request["reasoning_effort"];
  } else if (kwargs.contains("reasoning_effort") && !kwargs["reasoning_effort"].is_null()) {
    effort = kwargs["reasoning_effort"];
    effort_field = "chat_template_kwargs.reasoning_effort";
  }
  if (effort.is_string()) {
    std::string e = effort;
    if (e == "none") {
      o.thinking = false;
    } else if (e == "low") {
      o.reasoning_budget = 50, o.reasoning_effort = e;
    } else if (e == "high") {
      o.reasoning_budget = 75, o.reasoning_effort = e;
    } else if (e == "xhigh") {
      o.reasoning_budget = 75, o.reasoning_effort = "high";  // vLLM compatibility alias
    } else if (e == "max") {
      o.reasoning_budget = 100, o.reasoning_effort = e;
    } else {
      return invalid_argument(effort_field + ": '" + e +
                              "' is not one of none, low, high, xhigh, max or an integer 1..100");
    }
  } else if (effort.is_number_integer()) {
    int64_t n = effort.get<int64_t>();
    if (n < 1 || n > 100)
      return invalid_argument(effort_field + ": integer must be in 1..100, got " +
                              std::to_string(n));
    o.reasoning_budget = static_cast<int>(n);
    o.reasoning_effort = n > 75 ? "max" : "high";
  } else if (!effort.is_null()) {
    return invalid_argument(effort_field + ": expected a string or an integer 1..100, got " +
                            type_name(effort));
  }

  if (kwargs.contains("drop_thinking")) {
    if (!kwargs["drop_thinking"].is_boolean())
      return invalid_argument("chat_template_kwargs.drop_thinking: expected a boolean");
    o.drop_thinking = kwargs["drop_thinking"];
  }
  for (const char* f : {"add_generation_prompt", "continue_final_message"}) {
    if (request.contains(f) && !request[f].is_null() && !request[f].is_boolean())
      return invalid_argument(std::string(f) + ": expected a boolean");
  }
  if (request.contains("add_generation_prompt") && request["add_generation_prompt"].is_boolean())
    o.add_generation_prompt = request["add_generation_prompt"].get<bool>();
  o.continue_final_message = request.value("continue_final_message", Json(false)) == true;

  if (!request.contains("messages") || !request["messages"].is_array())
    return invalid_argument("messages: expected an array");
  if (request["messages"].empty()) return invalid_argument("messages: must not be empty");

  static const std::set<std::string> kRoles = {"system",    "developer", "user",
                                               "assistant", "tool",      "latest_reminder"};
  Json msgs = Json::array();
  for (size_t i = 0; i < request["messages"].size(); ++i) {
    std::string w = "messages[" + std::to_string(i) + "]";
    Json m = request["messages"][i];
    if (!m.is_object()) return invalid_argument(w + ": expected an object");
    if (!m.contains("role") || !m["role"].is_string())
      return invalid_argument(w + ".role: expected a string");
    std::string role = m["role"];
    if (!kRoles.count(role)) return invalid_argument(w + ".role: unknown role '" + role + "'");
    if (!m.contains("content")) m["content"] = nullptr;
    m.erase(kImageOffsetsField);
    // A tool result keeps its list form: the encoder renders its parts itself.
    if (role != "tool") {
      Json image_offsets = Json::array();
      RETURN_IF_ERROR(flatten_content(&m["content"], w + ".content", &image_offsets));
      if (!image_offsets.empty()) m[kImageOffsetsField] = std::move(image_offsets);
    } else if (!m["content"].is_string() && !m["content"].is_array() && !m["content"].is_null()) {
      return invalid_argument(w + ".content: expected a string, an array of parts or null");
    }
    if (role == "assistant") {
      if (m.contains("reasoning") && !m.contains("reasoning_content"))
        m["reasoning_content"] = m["reasoning"];
      m.erase("reasoning");
      if (m.contains("reasoning_content") && !m["reasoning_content"].is_string() &&
          !m["reasoning_content"].is_null())
        return invalid_argument(w + ".reasoning_content: expected a string");
      if (m.contains("tool_calls"))
        RETURN_IF_ERROR(check_tool_calls(m["tool_calls"], w + ".tool_calls"));
    }
    if (role == "developer" && variant == Variant::kV41 &&
        (!m["content"].is_string() || m["content"].get_ref<const std::string&>().empty()))
      return invalid_argument(w + ".content: a developer message needs non-empty content");
    if (m.contains("tools") && !m["tools"].is_null())
      RETURN_IF_ERROR(check_tools(m["tools"], w + ".tools"));
    if (m.contains("task") && !m["task"].is_null() && !m["task"].is_string())
      return invalid_argument(w + ".task: expected a string");
    if (m.contains("tool_call_id") && !m["tool_call_id"].is_string() &&
        !m["tool_call_id"].is_null())
      return invalid_argument(w + ".tool_call_id: expected a string");
    msgs.push_back(std::move(m));
  }

  if (request.contains("tools") && !request["tools"].is_null()) {
    RETURN_IF_ERROR(check_tools(request["tools"], "tools"));
    if (!request["tools"].empty()) {
      size_t sys = msgs.size();
      if (variant == Variant::kV41) {
        for (size_t i = 0; i < msgs.size(); ++i)
          if (msgs[i]["role"] == "system") {
            sys = i;
            break;
          }
      }
      // V4's adapter always inserts a fresh system message for the tools.
      if (sys == msgs.size()) {
        msgs.insert(msgs.begin(), Json{{"role", "system"}, {"content", ""}});
        sys = 0;
      }
      msgs[sys]["tools"] = request["tools"];
    }
  }

  if (o.continue_final_message) {
    if (o.add_generation_prompt.value_or(false))
      return invalid_argument(
          "continue_final_message: cannot be combined with add_generation_prompt=true");
    if (msgs.back()["role"] != "assistant")
      return invalid_argument(
          "continue_final_message: the last message must be an assistant "
          "message");
    o.add_generation_prompt = false;
    msgs.back()["wo_eos"] = true;
  }
  in.messages = std::move(msgs);
  return in;
}

}  // namespace

StatusOr<EncoderInput> map_chat_request(const Json& request, Variant variant) {
  try {
    return map_request_impl(request, variant);
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(std::string("request: unexpected field type: ") + e.what());
  }
}

StatusOr<std::string> encode_chat_request(const Json& request, Variant variant) {
  ASSIGN_OR_RETURN(EncoderInput in, map_chat_request(request, variant));
  return encode_messages(in.messages, in.options);
}

StatusOr<SegmentedPrompt> encode_chat_request_segmented(const Json& request, Variant variant) {
  ASSIGN_OR_RETURN(EncoderInput in, map_chat_request(request, variant));
  return encode_messages_segmented(in.messages, in.options);
}

StatusOr<std::string> encode_chat_request_text(std::string_view request_json, Variant variant) {
  Json j;
  try {
    j = Json::parse(request_json);
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(std::string("request: not valid JSON: ") + e.what());
  }
  return encode_chat_request(j, variant);
}

}  // namespace deepinfer::recipe

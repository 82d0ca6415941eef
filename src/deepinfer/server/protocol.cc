#include "deepinfer/server/protocol.h"

#include <algorithm>
#include <utility>

#include "deepinfer/recipe/chat_encoder.h"
#include "deepinfer/recipe/completion_parser.h"
#include "deepinfer/sample/sampling_params.h"

namespace deepinfer::server {
namespace {

using nlohmann::json;

enum class Kind { kString, kBool, kInt, kNumber, kObject, kArray, kStringOrArray, kAny };

struct Field {
  const char* name;
  Kind kind;
};

// Known fields and their JSON types; null is always accepted (means "default").
constexpr Field kFields[] = {
    {"model", Kind::kString},
    {"prompt", Kind::kStringOrArray},
    {"messages", Kind::kArray},
    {"stream", Kind::kBool},
    {"stream_options", Kind::kObject},
    {"max_tokens", Kind::kInt},
    {"max_completion_tokens", Kind::kInt},
    {"min_tokens", Kind::kInt},
    {"n", Kind::kInt},
    {"temperature", Kind::kNumber},
    {"top_p", Kind::kNumber},
    {"top_k", Kind::kInt},
    {"min_p", Kind::kNumber},
    {"presence_penalty", Kind::kNumber},
    {"frequency_penalty", Kind::kNumber},
    {"repetition_penalty", Kind::kNumber},
    {"seed", Kind::kInt},
    {"stop", Kind::kStringOrArray},
    {"stop_token_ids", Kind::kArray},
    {"logit_bias", Kind::kObject},
    {"ignore_eos", Kind::kBool},
    {"skip_special_tokens", Kind::kBool},
    {"include_stop_str_in_output", Kind::kBool},
    {"user", Kind::kString},
    {"priority", Kind::kInt},
    {"tools", Kind::kArray},
    {"response_format", Kind::kObject},
};

bool has_kind(const json& v, Kind k) {
  switch (k) {
    case Kind::kString:
      return v.is_string();
    case Kind::kBool:
      return v.is_boolean();
    case Kind::kInt:
      return v.is_number_integer() ||
             (v.is_number_float() && v.get<double>() == static_cast<int64_t>(v.get<double>()));
    case Kind::kNumber:
      return v.is_number();
    case Kind::kObject:
      return v.is_object();
    case Kind::kArray:
      return v.is_array();
    case Kind::kStringOrArray:
      return v.is_string() || v.is_array();
    case Kind::kAny:
      return true;
  }
  return false;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kString:
      return "a string";
    case Kind::kBool:
      return "a boolean";
    case Kind::kInt:
      return "an integer";
    case Kind::kNumber:
      return "a number";
    case Kind::kObject:
      return "an object";
    case Kind::kArray:
      return "an array";
    case Kind::kStringOrArray:
      return "a string or an array";
    case Kind::kAny:
      return "any";
  }
  return "?";
}

bool fail(ApiError* error, std::string message, std::string param) {
  *error = ApiError{};
  error->message = std::move(message);
  error->param = std::move(param);
  return false;
}

// validate()'s messages start with the field name ("top_p must be ..."); recover it for param.
std::string param_of(const std::string& message) {
  std::string head = message.substr(0, message.find_first_of(" :"));
  for (const Field& f : kFields)
    if (head == f.name) return head;
  if (head == "logprobs") return head;
  return {};
}

// Index of the first byte that is not part of well-formed UTF-8, or npos.
size_t invalid_utf8_at(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return i;
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 2) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return i;
    i += len;
  }
  return std::string_view::npos;
}

// OpenAI's `logprobs` is a boolean (plus `top_logprobs`) in chat and a count in completions;
// both become SamplingParams::logprobs (the number of alternatives).
bool parse_logprobs(Endpoint endpoint, const json& j, json* sp, ApiError* error) {
  sp->erase("logprobs");
  const json lp = j.value("logprobs", json());
  const json top = j.value("top_logprobs", json());
  if (endpoint == Endpoint::kCompletions) {
    if (lp.is_null()) return true;
    if (!has_kind(lp, Kind::kInt)) return fail(error, "logprobs must be an integer", "logprobs");
    (*sp)["logprobs"] = lp;
    return true;
  }
  if (!lp.is_null() && !lp.is_boolean())
    return fail(error, "logprobs must be a boolean", "logprobs");
  if (!top.is_null() && !has_kind(top, Kind::kInt))
    return fail(error, "top_logprobs must be an integer", "top_logprobs");
  const bool on = lp.is_boolean() && lp.get<bool>();
  if (!top.is_null() && !on)
    return fail(error, "top_logprobs requires logprobs to be true", "top_logprobs");
  if (!on) return true;
  const int64_t n = top.is_null() ? 0 : static_cast<int64_t>(top.get<double>());
  if (n < 0 || n > sample::kMaxLogprobs)
    return fail(error,
                "top_logprobs must be in [0, " + std::to_string(sample::kMaxLogprobs) + "], got " +
                    std::to_string(n),
                "top_logprobs");
  (*sp)["logprobs"] = n;
  return true;
}

// OpenAI's response_format as the engine's so_args. The schema is read from an order-preserving
// parse of the body: property order decides the order the grammar generates keys in.
bool parse_response_format(const json& j, std::string_view body,
                           std::optional<sample::StructuredOutput>* so, ApiError* error) {
  auto it = j.find("response_format");
  if (it == j.end() || it->is_null()) return true;
  const json type = it->value("type", json());
  if (!type.is_string())
    return fail(error, "response_format.type must be a string", "response_format.type");
  const std::string t = type.get<std::string>();
  if (t == "text") return true;
  if (t == "json_object") {
    *so = sample::StructuredOutput{sample::StructuredOutput::Kind::kJsonObject, ""};
    return true;
  }
  if (t != "json_schema")
    return fail(error, "response_format.type must be 'text', 'json_object' or 'json_schema'",
                "response_format.type");
  const auto ordered = nlohmann::ordered_json::parse(body, nullptr, false);
  const auto& rf = ordered["response_format"];
  if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
    return fail(error, "response_format.json_schema must be an object",
                "response_format.json_schema");
  const auto& js = rf["json_schema"];
  if (!js.contains("schema") || !(js["schema"].is_object() || js["schema"].is_boolean()))
    return fail(error, "response_format.json_schema.schema must be a JSON Schema object",
                "response_format.json_schema.schema");
  *so = sample::StructuredOutput{sample::StructuredOutput::Kind::kJsonSchema, js["schema"].dump()};
  return true;
}

// The grammar constrains the whole completion, reasoning included, so a structured chat request
// runs without thinking: by default it is switched off; asked for explicitly, it is an error.
bool structured_chat_without_thinking(json* j, ApiError* error) {
  json& kwargs = (*j)["chat_template_kwargs"];
  if (kwargs.is_null()) kwargs = json::object();
  if (!kwargs.is_object())
    return fail(error, "chat_template_kwargs must be an object", "chat_template_kwargs");
  auto on = [](const json& v) { return v.is_boolean() && v.get<bool>(); };
  auto effort_on = [](const json& v) { return !v.is_null() && v != "none"; };
  const bool asked_for_thinking = on(kwargs.value("thinking", json())) ||
                                  on(kwargs.value("enable_thinking", json())) ||
                                  effort_on(j->value("reasoning_effort", json())) ||
                                  effort_on(kwargs.value("reasoning_effort", json()));
  if (asked_for_thinking)
    return fail(error,
                "response_format json_object/json_schema cannot be combined with thinking yet; "
                "set chat_template_kwargs.thinking to false",
                "response_format");
  kwargs["thinking"] = false;
  return true;
}

// tool_choice: "auto" (the default) offers the tools; "none" leaves them out of the prompt, so
// the model is not told it has any. Forcing a call ("required", a named function) needs the
// DSML markup as a grammar, which is not built yet: a clear 400 rather than a silent "auto".
bool apply_tool_choice(json* j, recipe::Json* rj, ApiError* error) {
  auto it = j->find("tool_choice");
  if (it == j->end() || it->is_null()) return true;
  std::string forced;
  if (it->is_string()) {
    const std::string c = it->get<std::string>();
    if (c == "auto") return true;
    if (c == "none") {
      j->erase("tools");
      rj->erase("tools");
      return true;
    }
    if (c != "required")
      return fail(error, "tool_choice must be 'none', 'auto', 'required' or a named function",
                  "tool_choice");
    forced = "'required'";
  } else if (it->is_object()) {
    const json fn = it->value("function", json());
    if (!fn.is_object() || !fn.value("name", json()).is_string())
      return fail(error, "tool_choice.function.name must be a string", "tool_choice");
    forced = "a named function";
  } else {
    return fail(error, "tool_choice must be a string or an object", "tool_choice");
  }
  return fail(error, "tool_choice " + forced + " is not supported yet (use 'auto' or 'none')",
              "tool_choice");
}

// DeepSeek's API switch, `"thinking": {"type": "enabled" | "disabled"}`, as the recipe's
// chat_template_kwargs.thinking (which wins when both are given).
bool apply_thinking_switch(json* j, recipe::Json* rj, ApiError* error) {
  auto it = j->find("thinking");
  if (it == j->end() || it->is_null()) return true;
  const json type = it->is_object() ? it->value("type", json()) : json();
  if (type != "enabled" && type != "disabled")
    return fail(error, "thinking must be {\"type\": \"enabled\"} or {\"type\": \"disabled\"}",
                "thinking");
  json& kwargs = (*j)["chat_template_kwargs"];
  if (kwargs.is_null()) kwargs = json::object();
  if (!kwargs.is_object() || kwargs.contains("thinking")) return true;  // recipe decides
  kwargs["thinking"] = type == "enabled";
  (*rj)["chat_template_kwargs"]["thinking"] = type == "enabled";
  return true;
}

constexpr int kMaxN = 128;

// vLLM's floor: -inf (a masked token) is not representable in JSON.
double clamp_logprob(float lp) { return std::max(static_cast<double>(lp), -9999.0); }

json token_bytes(const std::string& t) {
  json b = json::array();
  for (unsigned char c : t) b.push_back(static_cast<int>(c));
  return b;
}

json tool_call_json(const recipe::ToolCall& c, const std::string& id) {
  return {{"id", id},
          {"type", "function"},
          {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

}  // namespace

json error_body(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return {{"error", err}};
}

ApiError not_found_error(std::string_view path) {
  return {404, "no route for " + std::string(path), "invalid_request_error", "", "not_found"};
}

ApiError unauthorized_error() {
  return {401, "invalid or missing API key (Authorization: Bearer <key>)", "authentication_error",
          "", "invalid_api_key"};
}

ApiError body_too_large_error(size_t limit) {
  return {413, "request body exceeds " + std::to_string(limit) + " bytes", "invalid_request_error",
          "", "request_too_large"};
}

ApiError malformed_json_error(std::string_view what) {
  return {400, "request body is not valid JSON: " + std::string(what), "invalid_request_error", "",
          "invalid_json"};
}

ApiError invalid_utf8_error(size_t offset) {
  return {400, "request body is not valid UTF-8 (byte " + std::to_string(offset) + ")",
          "invalid_request_error", "", "invalid_utf8"};
}

ApiError error_from_status(const Status& st, std::string param) {
  ApiError e;
  e.message = st.message();
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kNotFound:
    case StatusCode::kUnimplemented:
      e.http_status = 400;
      break;
    case StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "rate_limit_error";
      break;
    default:
      e.http_status = 500;
      e.type = "internal_error";
  }
  e.param = param.empty() ? param_of(st.message()) : std::move(param);
  return e;
}

bool parse_request(Endpoint endpoint, std::string_view body, int64_t vocab_size, ParsedRequest* out,
                   ApiError* error) {
  if (size_t bad = invalid_utf8_at(body); bad != std::string_view::npos) {
    *error = invalid_utf8_error(bad);
    return false;
  }
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *error = malformed_json_error("parse error");
    return false;
  }
  if (!j.is_object()) return fail(error, "request body must be a JSON object", "");
  for (const Field& f : kFields) {
    auto it = j.find(f.name);
    if (it == j.end() || it->is_null()) continue;
    if (!has_kind(*it, f.kind))
      return fail(error, std::string(f.name) + " must be " + kind_name(f.kind), f.name);
  }
  *out = ParsedRequest{};
  out->endpoint = endpoint;
  out->model = j.value("model", json("")).is_string() ? j.value("model", std::string()) : "";
  out->stream = j.contains("stream") && j["stream"].is_boolean() && j["stream"].get<bool>();
  if (j.contains("stream_options") && j["stream_options"].is_object()) {
    const json& so = j["stream_options"];
    if (so.contains("include_usage") && !so["include_usage"].is_null()) {
      if (!so["include_usage"].is_boolean())
        return fail(error, "stream_options.include_usage must be a boolean",
                    "stream_options.include_usage");
      out->include_usage = so["include_usage"].get<bool>();
    }
  }

  // max_completion_tokens is the newer name; it wins when both are given (as OpenAI's does).
  json sp = j;
  if (j.contains("max_completion_tokens") && !j["max_completion_tokens"].is_null())
    sp["max_tokens"] = j["max_completion_tokens"];
  out->max_tokens_given = !sp.value("max_tokens", json()).is_null();
  if (!parse_logprobs(endpoint, j, &sp, error)) return false;
  std::optional<sample::StructuredOutput> so;
  if (!parse_response_format(j, body, &so, error)) return false;
  if (so && j.contains("so_args") && !j["so_args"].is_null())
    return fail(error, "give one of response_format and so_args", "response_format");
  auto params = sample::sampling_params_from_json(sp);
  if (!params.ok()) {
    *error = error_from_status(params.status());
    return false;
  }
  if (so) {
    params->so_args = so;
    out->response_format = true;
  }
  Status st = sample::validate(*params, vocab_size);
  if (!st.ok()) {
    *error = error_from_status(st);
    return false;
  }
  // Each sample holds its own sequence state; a bound keeps one request from taking the pool.
  if (params->n > kMaxN) return fail(error, "n must be at most " + std::to_string(kMaxN), "n");
  out->gen.params = *params;
  if (j.contains("priority") && j["priority"].is_number()) out->gen.priority = j["priority"];

  if (endpoint == Endpoint::kCompletions) {
    if (!j.contains("prompt") || j["prompt"].is_null())
      return fail(error, "prompt is required", "prompt");
    const json& p = j["prompt"];
    if (p.is_string()) {
      out->gen.prompt = p.get<std::string>();
    } else {
      // A token-id array; batches of prompts are not supported yet.
      for (const json& t : p) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab_size)
          return fail(error, "prompt must be a string or an array of token ids", "prompt");
        out->gen.prompt_ids.push_back(t.get<int32_t>());
      }
      if (out->gen.prompt_ids.empty()) return fail(error, "prompt must not be empty", "prompt");
    }
  } else {
    if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty())
      return fail(error, "messages is required and must be a non-empty array", "messages");
    recipe::Json rj = recipe::Json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (!apply_tool_choice(&j, &rj, error)) return false;
    if (!apply_thinking_switch(&j, &rj, error)) return false;
    if (out->response_format) {
      if (!structured_chat_without_thinking(&j, error)) return false;
      rj["chat_template_kwargs"]["thinking"] = false;
    }
    auto mapped = recipe::map_chat_request(rj);
    if (!mapped.ok()) {
      *error = error_from_status(mapped.status(), "messages");
      return false;
    }
    out->thinking = mapped->options.thinking;
    out->gen.chat = std::move(j);
  }
  return true;
}

json usage_json(const Usage& u, int64_t completion_tokens, int64_t reasoning_tokens) {
  // Re-tokenizing the reasoning text can give more tokens than were generated (random output
  // tokenizes differently); it is a part of the completion, never more.
  reasoning_tokens = std::min(reasoning_tokens, completion_tokens);
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", u.prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"completion_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
          {"prompt_cache_hit_tokens", u.cached_tokens},
          {"prompt_cache_miss_tokens", u.prompt_tokens - u.cached_tokens}};
}

recipe::ParsedMessage parse_chat_output(const std::string& text, bool thinking) {
  auto strict = recipe::parse_completion(text, thinking);
  if (strict.ok()) return *strict;
  recipe::StreamingParser parser(thinking);
  recipe::StreamDelta ignored;
  parser.feed(text, &ignored);
  parser.finish(&ignored);
  return parser.message();
}

static int64_t total_completion_tokens(const RequestOutput& out) {
  int64_t n = 0;
  for (const CompletionOutput& c : out.outputs) n += static_cast<int64_t>(c.token_ids.size());
  return n;
}

json chat_logprobs(std::span<const TokenLogprobs> lps, const TokenText& token_text) {
  json content = json::array();
  for (const TokenLogprobs& t : lps) {
    std::string text = token_text(t.token);
    json top = json::array();
    for (const auto& [id, lp] : t.top) {
      std::string alt = token_text(id);
      top.push_back({{"token", alt}, {"logprob", clamp_logprob(lp)}, {"bytes", token_bytes(alt)}});
    }
    content.push_back({{"token", text},
                       {"logprob", clamp_logprob(t.logprob)},
                       {"bytes", token_bytes(text)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

json completion_logprobs(std::span<const TokenLogprobs> lps, const TokenText& token_text,
                         int64_t* text_offset) {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(),
       offsets = json::array();
  for (const TokenLogprobs& t : lps) {
    std::string text = token_text(t.token);
    tokens.push_back(text);
    token_lps.push_back(clamp_logprob(t.logprob));
    json top = json::object();
    for (const auto& [id, lp] : t.top) top[token_text(id)] = clamp_logprob(lp);
    tops.push_back(top);
    offsets.push_back(*text_offset);
    *text_offset += static_cast<int64_t>(text.size());
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_lps},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json completion_response(const std::string& id, int64_t created, const std::string& model,
                         const RequestOutput& out, const TokenText& token_text) {
  json choices = json::array();
  for (const CompletionOutput& c : out.outputs) {
    int64_t offset = 0;
    json lps = token_text && !c.logprobs.empty()
                   ? completion_logprobs(c.logprobs, token_text, &offset)
                   : json();
    choices.push_back({{"index", c.index},
                       {"text", c.text},
                       {"logprobs", lps},
                       {"finish_reason", c.finish_reason ? json(*c.finish_reason) : json()}});
  }
  return {{"id", id},           {"object", "text_completion"},
          {"created", created}, {"model", model},
          {"choices", choices}, {"usage", usage_json(out.usage, total_completion_tokens(out), 0)}};
}

json chat_response(const std::string& id, int64_t created, const std::string& model,
                   const RequestOutput& out, bool thinking, int64_t reasoning_tokens,
                   const TokenText& token_text) {
  json choices = json::array();
  for (const CompletionOutput& c : out.outputs) {
    recipe::ParsedMessage m = parse_chat_output(c.text, thinking);
    json msg = {{"role", "assistant"}, {"content", m.content}};
    if (thinking) msg["reasoning_content"] = m.reasoning_content;
    std::optional<std::string> finish = c.finish_reason;
    if (!m.tool_calls.empty()) {
      json calls = json::array();
      for (size_t i = 0; i < m.tool_calls.size(); ++i)
        calls.push_back(tool_call_json(m.tool_calls[i], id + "-call-" + std::to_string(i)));
      msg["tool_calls"] = calls;
      if (finish == "stop") finish = "tool_calls";
    }
    json lps = token_text && !c.logprobs.empty() ? chat_logprobs(c.logprobs, token_text) : json();
    choices.push_back({{"index", c.index},
                       {"message", msg},
                       {"logprobs", lps},
                       {"finish_reason", finish ? json(*finish) : json()}});
  }
  return {{"id", id},
          {"object", "chat.completion"},
          {"created", created},
          {"model", model},
          {"choices", choices},
          {"usage", usage_json(out.usage, total_completion_tokens(out), reasoning_tokens)}};
}

json completion_chunk(const std::string& id, int64_t created, const std::string& model, int index,
                      const std::string& delta_text,
                      const std::optional<std::string>& finish_reason, const json& logprobs) {
  json choice = {{"index", index},
                 {"text", delta_text},
                 {"logprobs", logprobs},
                 {"finish_reason", finish_reason ? json(*finish_reason) : json()}};
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})}};
}

json chat_chunk(const std::string& id, int64_t created, const std::string& model, int index,
                const recipe::StreamDelta& delta, bool first,
                const std::optional<std::string>& finish_reason, const json& logprobs) {
  json d = json::object();
  if (first) d["role"] = "assistant";
  if (!delta.reasoning.empty()) d["reasoning_content"] = delta.reasoning;
  if (!delta.content.empty() || first) d["content"] = delta.content;
  if (!delta.tool_calls.empty()) {
    json calls = json::array();
    for (const recipe::ToolCallDelta& t : delta.tool_calls) {
      json c = {{"index", t.index}, {"function", {{"arguments", t.arguments}}}};
      if (!t.name.empty()) {
        c["id"] = id + "-call-" + std::to_string(t.index);
        c["type"] = "function";
        c["function"]["name"] = t.name;
      }
      calls.push_back(c);
    }
    d["tool_calls"] = calls;
  }
  json choice = {{"index", index},
                 {"delta", d},
                 {"logprobs", logprobs},
                 {"finish_reason", finish_reason ? json(*finish_reason) : json()}};
  return {{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})}};
}

json usage_chunk(const std::string& id, int64_t created, const std::string& model,
                 Endpoint endpoint, const json& usage) {
  return {{"id", id},
          {"object",
           endpoint == Endpoint::kChatCompletions ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array()},
          {"usage", usage}};
}

std::string sse_event(const json& j) {
  // error_handler_t::replace: model output may split or contain invalid UTF-8.
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

json models_response(const std::string& model_id, int64_t created) {
  return {{"object", "list"},
          {"data", json::array({{{"id", model_id},
                                 {"object", "model"},
                                 {"created", created},
                                 {"owned_by", "deepinfer"}}})}};
}

}  // namespace deepinfer::server

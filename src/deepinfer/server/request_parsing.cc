// OpenAI request JSON -> ParsedRequest (protocol.h): type checks, sampling params, prompts,
// messages, response_format, tool_choice and thinking, and engine errors in the request's terms.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "deepinfer/recipe/chat_encoder.h"
#include "deepinfer/recipe/tool_call_grammar.h"
#include "deepinfer/sample/sampling_params.h"
#include "deepinfer/server/protocol.h"

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
    {"seq_seed", Kind::kInt},
    {"stop", Kind::kStringOrArray},
    {"stop_token_ids", Kind::kArray},
    {"logit_bias", Kind::kObject},
    {"ignore_eos", Kind::kBool},
    {"skip_special_tokens", Kind::kBool},
    {"include_stop_str_in_output", Kind::kBool},
    {"user", Kind::kString},
    {"priority", Kind::kInt},
    {"cache_retention", Kind::kString},
    {"tools", Kind::kArray},
    {"response_format", Kind::kObject},
    {"echo", Kind::kBool},
};

// The body's keys that sampling_params_from_json reads (logprobs is mapped separately): only
// these are copied, never the whole body.
// clang-format off
constexpr const char* kSamplingKeys[] = {
    "n", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "frequency_penalty",
    "presence_penalty", "logit_bias", "seed", "seq_seed", "max_tokens", "min_tokens",
    "stop_token_ids", "stop", "include_stop_str_in_output", "ignore_eos", "skip_special_tokens",
    "so_args"};
// clang-format on

bool has_kind(const json& v, Kind k) {
  switch (k) {
    case Kind::kString:
      return v.is_string();
    case Kind::kBool:
      return v.is_boolean();
    case Kind::kInt: {
      if (v.is_number_integer()) return true;
      // Integral floats (16.0) count, as in pydantic's lax mode; the bound keeps casts defined.
      const double d = v.is_number_float() ? v.get<double>() : 0.5;
      return std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18;
    }
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

// A value has_kind(kInt) accepted, saturated to int64 (unsigned JSON numbers can exceed it).
int64_t as_int64(const json& v) {
  if (v.is_number_unsigned())
    return static_cast<int64_t>(
        std::min<uint64_t>(v.get<uint64_t>(), std::numeric_limits<int64_t>::max()));
  if (v.is_number_integer()) return v.get<int64_t>();
  return static_cast<int64_t>(v.get<double>());
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

bool fail(ApiError* error, std::string message, std::string param,
          std::string code = "invalid_value") {
  *error = ApiError{};
  error->message = std::move(message);
  error->param = std::move(param);
  error->code = std::move(code);
  return false;
}

// validate()'s messages start with the field name ("top_p must be ...", "stop[1] must ...");
// recover the top-level field for param.
std::string param_of(const std::string& message) {
  std::string head = message.substr(0, message.find_first_of(" :[."));
  for (const Field& f : kFields)
    if (head == f.name) return head;
  if (head == "logprobs" || head == "so_args") return head;
  return {};
}

// sampling_params' type errors read "<field> must be <kind>, got <JSON type name>".
bool is_type_error(const std::string& message) {
  const size_t at = message.rfind(", got ");
  if (at == std::string::npos || message.find(" must be ") == std::string::npos) return false;
  const std::string got = message.substr(at + 6);
  for (const char* t : {"null", "boolean", "string", "number", "object", "array", "binary"})
    if (got == t) return true;
  return false;
}

// The engine's submit checks: "prompt (N tokens) + max_tokens (M) exceeds max_model_len (L)",
// and "... needs the KV state of S tokens, more than the pool holds for one sequence (P) ...".
bool is_context_length_error(const std::string& message) {
  return message.rfind("prompt (", 0) == 0 &&
         message.find(") + max_tokens (") != std::string::npos &&
         (message.find("exceeds max_model_len") != std::string::npos ||
          message.find("more than the pool holds") != std::string::npos);
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
    if (!has_kind(lp, Kind::kInt))
      return fail(error, "logprobs must be an integer", "logprobs", "invalid_type");
    (*sp)["logprobs"] = lp;
    return true;
  }
  if (!lp.is_null() && !lp.is_boolean())
    return fail(error, "logprobs must be a boolean", "logprobs", "invalid_type");
  if (!top.is_null() && !has_kind(top, Kind::kInt))
    return fail(error, "top_logprobs must be an integer", "top_logprobs", "invalid_type");
  const bool on = lp.is_boolean() && lp.get<bool>();
  if (!top.is_null() && !on)
    return fail(error, "top_logprobs requires logprobs to be true", "top_logprobs");
  if (!on) return true;
  const int64_t n = top.is_null() ? 0 : as_int64(top);
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
    return fail(error, "response_format.type must be a string", "response_format.type",
                "invalid_type");
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
                "response_format.json_schema", "invalid_type");
  const auto& js = rf["json_schema"];
  if (!js.contains("schema") || !(js["schema"].is_object() || js["schema"].is_boolean()))
    return fail(error, "response_format.json_schema.schema must be a JSON Schema object",
                "response_format.json_schema.schema", "invalid_type");
  *so = sample::StructuredOutput{sample::StructuredOutput::Kind::kJsonSchema, js["schema"].dump()};
  return true;
}

// The grammar constrains the whole completion, reasoning included, so a structured chat request
// runs without thinking: by default it is switched off; asked for explicitly, it is an error.
bool structured_chat_without_thinking(json* j, ApiError* error) {
  json& kwargs = (*j)["chat_template_kwargs"];
  if (kwargs.is_null()) kwargs = json::object();
  if (!kwargs.is_object())
    return fail(error, "chat_template_kwargs must be an object", "chat_template_kwargs",
                "invalid_type");
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
// the model is not told it has any. "required" and a named function force a call as vLLM does,
// with structured output: the DSML calls block as an EBNF grammar (so_args) that covers the
// whole completion, so the request runs without thinking, as for response_format.
bool apply_tool_choice(json* j, recipe::Json* rj, ParsedRequest* out, ApiError* error) {
  auto it = j->find("tool_choice");
  if (it == j->end() || it->is_null()) return true;
  recipe::ToolCallGrammarOptions options;
  options.variant = out->variant;
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
      return fail(error, "tool_choice.function.name must be a string", "tool_choice",
                  "invalid_type");
    options.function = fn["name"].get<std::string>();
    forced = "naming a function";
  } else {
    return fail(error, "tool_choice must be a string or an object", "tool_choice", "invalid_type");
  }
  const json parallel = j->value("parallel_tool_calls", json());
  if (!parallel.is_null() && !parallel.is_boolean())
    return fail(error, "parallel_tool_calls must be a boolean", "parallel_tool_calls",
                "invalid_type");
  options.parallel_tool_calls = !parallel.is_boolean() || parallel.get<bool>();
  if (out->gen.params.so_args)
    return fail(error,
                "tool_choice " + forced + " cannot be combined with " +
                    (out->response_format ? "response_format" : "so_args") +
                    " (both constrain the whole output)",
                "tool_choice");
  const recipe::Json tools = rj->value("tools", recipe::Json());
  if (!tools.is_array() || tools.empty())
    return fail(error, "tool_choice " + forced + " needs a non-empty tools array", "tool_choice");
  auto grammar = recipe::tool_call_grammar(tools, options);
  if (!grammar.ok()) {
    const std::string& m = grammar.status().message();
    return fail(error, m, m.rfind("tools", 0) == 0 ? "tools" : "tool_choice");
  }
  if (!structured_chat_without_thinking(j, error)) {
    if (error->param == "response_format") {
      error->message = "tool_choice " + forced +
                       " cannot be combined with thinking yet; set chat_template_kwargs.thinking "
                       "to false";
      error->param = "tool_choice";
    }
    return false;
  }
  (*rj)["chat_template_kwargs"]["thinking"] = false;
  out->gen.params.so_args =
      sample::StructuredOutput{sample::StructuredOutput::Kind::kEbnf, std::move(*grammar)};
  return true;
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

// Completions' prompt: a string or a flat list of token ids is one prompt; a list of strings or
// a list of token-id lists is a batch. Strings are moved out of `p`.
bool parse_prompts(json* p, int64_t vocab_size, std::vector<PromptInput>* prompts,
                   ApiError* error) {
  prompts->clear();
  if (p->is_string()) {
    prompts->push_back({false, std::move(p->get_ref<std::string&>()), {}});
    return true;
  }
  if (p->empty()) return fail(error, "prompt must not be empty", "prompt");
  // Each entry of a batch; a flat id list is one prompt, the same check at one level.
  auto ids_of = [&](const json& list, const std::string& name, std::vector<int32_t>* ids) {
    for (size_t i = 0; i < list.size(); ++i) {
      const json& t = list[i];
      const std::string at = name + "[" + std::to_string(i) + "]";
      if (!t.is_number_integer())
        return fail(error, at + " must be a token id (an integer)", "prompt", "invalid_type");
      if (t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab_size)
        return fail(
            error,
            at + " must be a token id in [0, " + std::to_string(vocab_size) + "), got " + t.dump(),
            "prompt");
      ids->push_back(t.get<int32_t>());
    }
    return true;
  };
  const json& head = p->front();
  if (head.is_number()) {
    PromptInput one{true, {}, {}};
    if (!ids_of(*p, "prompt", &one.ids)) return false;
    prompts->push_back(std::move(one));
    return true;
  }
  if (!head.is_string() && !head.is_array())
    return fail(error,
                "prompt must be a string, an array of strings, an array of token ids or an array "
                "of token-id arrays",
                "prompt", "invalid_type");
  if (p->size() > static_cast<size_t>(kMaxChoices))
    return fail(error,
                "prompt has " + std::to_string(p->size()) + " prompts, at most " +
                    std::to_string(kMaxChoices) + " are allowed",
                "prompt");
  for (size_t i = 0; i < p->size(); ++i) {
    json& e = (*p)[i];
    const std::string at = "prompt[" + std::to_string(i) + "]";
    // A batch is all strings or all token lists, as OpenAI's types have it.
    if (head.is_string()) {
      if (!e.is_string()) return fail(error, at + " must be a string", "prompt", "invalid_type");
      prompts->push_back({false, std::move(e.get_ref<std::string&>()), {}});
      continue;
    }
    if (!e.is_array())
      return fail(error, at + " must be an array of token ids", "prompt", "invalid_type");
    if (e.empty()) return fail(error, at + " must not be empty", "prompt");
    PromptInput one{true, {}, {}};
    if (!ids_of(e, at, &one.ids)) return false;
    prompts->push_back(std::move(one));
  }
  return true;
}

// What the chat template needs from each message before it is rendered: a user turn without
// content would render as an empty turn (OpenAI answers 400).
bool check_messages(const json& messages, ApiError* error) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return fail(error, at + " must be an object", at, "invalid_type");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) continue;  // the recipe names a bad role
    auto content = m.find("content");
    if (*role == "user" && (content == m.end() || content->is_null()))
      return fail(error, at + ".content is required for a user message", at + ".content",
                  "missing_required_parameter");
  }
  return true;
}

}  // namespace

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
      e.code = "internal_error";
      return e;
  }
  if (e.http_status == 429) {
    e.code = "rate_limit_exceeded";
    return e;
  }
  if (is_context_length_error(e.message)) {
    e.param = "max_tokens";
    e.code = "context_length_exceeded";  // OpenAI's code
    return e;
  }
  e.param = param.empty() ? param_of(e.message) : std::move(param);
  e.code = is_type_error(e.message) ? "invalid_type" : "invalid_value";
  return e;
}

ApiError error_from_status(const Status& st, const ParsedRequest& req) {
  // Grammar errors name so_args (the engine's field); the client sent response_format, or a
  // forced tool_choice (its grammar is the so_args; the two never come together).
  if (st.message().rfind("so_args", 0) == 0) {
    if (req.response_format) return error_from_status(st, "response_format");
    if (req.gen.chat) {
      auto it = req.gen.chat->find("tool_choice");
      if (it != req.gen.chat->end() && (it->is_object() || *it == "required"))
        return error_from_status(st, "tool_choice");
    }
  }
  return error_from_status(st);
}

int json_nesting_depth(std::string_view body, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped byte cannot end the string
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > limit) return limit + 1;
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    }
  }
  return deepest;
}

bool parse_request(Endpoint endpoint, std::string_view body, int64_t vocab_size,
                   recipe::Variant variant, ParsedRequest* out, ApiError* error) {
  if (size_t bad = invalid_utf8_at(body); bad != std::string_view::npos) {
    *error = invalid_utf8_error(bad);
    return false;
  }
  // Parsing is iterative, but copying and destroying parts of the value are not: bound the depth
  // before anything recurses.
  if (json_nesting_depth(body) > kMaxJsonDepth) {
    *error = json_too_deep_error();
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
      return fail(error, std::string(f.name) + " must be " + kind_name(f.kind), f.name,
                  "invalid_type");
  }
  *out = ParsedRequest{};
  out->endpoint = endpoint;
  out->variant = variant;
  out->model = j.value("model", json("")).is_string() ? j.value("model", std::string()) : "";
  out->stream = j.contains("stream") && j["stream"].is_boolean() && j["stream"].get<bool>();
  if (j.contains("stream_options") && j["stream_options"].is_object()) {
    const json& so = j["stream_options"];
    if (so.contains("include_usage") && !so["include_usage"].is_null()) {
      if (!so["include_usage"].is_boolean())
        return fail(error, "stream_options.include_usage must be a boolean",
                    "stream_options.include_usage", "invalid_type");
      out->include_usage = so["include_usage"].get<bool>();
    }
  }

  // Only the sampling fields, not a deep copy of the body (messages can be megabytes).
  json sp = json::object();
  for (const char* key : kSamplingKeys)
    if (auto it = j.find(key); it != j.end()) sp[key] = *it;
  // max_completion_tokens is the newer name; it wins when both are given (as OpenAI's does).
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
  sp = json();
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
  if (params->n > kMaxChoices)
    return fail(error, "n must be at most " + std::to_string(kMaxChoices), "n");
  out->gen.params = *params;
  if (j.contains("priority") && j["priority"].is_number()) {
    const int64_t priority = as_int64(j["priority"]);
    if (priority < std::numeric_limits<int>::min() || priority > std::numeric_limits<int>::max())
      return fail(error, "priority must be a 32-bit integer", "priority");
    out->gen.priority = static_cast<int>(priority);
  }
  // Prefix cache retention (an extension): "agent" 3 days, "chat" 7 days, "none" stores nothing.
  if (j.contains("cache_retention") && j["cache_retention"].is_string()) {
    const std::string v = j["cache_retention"].get<std::string>();
    const std::optional<CacheRetention> r = parse_cache_retention(v);
    if (!r)
      return fail(error,
                  "cache_retention must be \"agent\", \"chat\" or \"none\", got \"" + v + "\"",
                  "cache_retention");
    out->gen.cache_retention = *r;
  } else if (j.contains("tools") && j["tools"].is_array() && !j["tools"].empty()) {
    // Decided here: the engine gets the chat's ids, without the tools it would look at.
    out->gen.cache_retention = CacheRetention::kAgent;
  }

  if (endpoint == Endpoint::kCompletions) {
    if (!j.contains("prompt") || j["prompt"].is_null())
      return fail(error, "prompt is required", "prompt", "missing_required_parameter");
    if (!parse_prompts(&j["prompt"], vocab_size, &out->prompts, error)) return false;
    if (out->prompts.size() * static_cast<size_t>(params->n) > static_cast<size_t>(kMaxChoices))
      return fail(error,
                  "prompt has " + std::to_string(out->prompts.size()) + " prompts and n is " +
                      std::to_string(params->n) + ": at most " + std::to_string(kMaxChoices) +
                      " choices (prompts × n) per request",
                  "prompt");
    const PromptInput& first = out->prompts.front();
    if (first.is_ids)
      out->gen.prompt_ids = first.ids;
    else
      out->gen.prompt = first.text;
    out->echo = j.value("echo", json()).is_boolean() && j["echo"].get<bool>();
    // OpenAI answers echo + logprobs with the prompt's logprobs too; the engine does not compute
    // them.
    if (out->echo && params->logprobs)
      return fail(error,
                  "echo with logprobs is not supported (prompt logprobs are not computed); drop "
                  "one of them",
                  "echo");
  } else {
    if (!j.contains("messages") || j["messages"].is_null())
      return fail(error, "messages is required", "messages", "missing_required_parameter");
    if (j["messages"].empty()) return fail(error, "messages must be a non-empty array", "messages");
    if (!check_messages(j["messages"], error)) return false;
    recipe::Json rj = recipe::Json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (!apply_thinking_switch(&j, &rj, error)) return false;
    // After the thinking switch: a forced call turns thinking off (or refuses it).
    if (!apply_tool_choice(&j, &rj, out, error)) return false;
    out->parse_tool_calls = j.contains("tools") && j["tools"].is_array() && !j["tools"].empty();
    if (out->response_format) {
      if (!structured_chat_without_thinking(&j, error)) return false;
      rj["chat_template_kwargs"]["thinking"] = false;
    }
    auto mapped = recipe::map_chat_request(rj, out->variant);
    if (!mapped.ok()) {
      *error = error_from_status(mapped.status(), "messages");
      return false;
    }
    out->thinking = mapped->options.thinking;
    out->gen.chat = std::move(j);
  }
  return true;
}

GenerateRequest request_for_prompt(const ParsedRequest& req, size_t i) {
  GenerateRequest g = req.gen;
  if (i < req.prompts.size()) {
    const PromptInput& p = req.prompts[i];
    g.prompt.reset();
    g.prompt_ids.clear();
    if (p.is_ids)
      g.prompt_ids = p.ids;
    else
      g.prompt = p.text;
  }
  return g;
}

}  // namespace deepinfer::server

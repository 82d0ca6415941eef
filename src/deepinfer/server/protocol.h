// OpenAI protocol translation, with no sockets: request JSON -> GenerateRequest, engine outputs
// -> response / SSE chunk JSON, and Status -> OpenAI error bodies. The HTTP layer only moves
// bytes; everything a client can observe about the API shape is decided here.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/recipe/streaming_parser.h"

namespace deepinfer::server {

enum class Endpoint { kCompletions, kChatCompletions };

// Deepest nesting of JSON arrays/objects a request body may have (the body itself is level 1).
// Copying, comparing and dumping a json value recurse once per level, so deeper bodies are
// refused by a byte scan before anything is parsed.
inline constexpr int kMaxJsonDepth = 512;
// At most this many choices (prompts × n) per request: each sample holds its own sequence state,
// and the bound keeps one request from taking the whole pool.
inline constexpr int kMaxChoices = 128;

// An OpenAI-style error: {"error": {"message", "type", "param", "code"}}. Codes used:
// invalid_type, missing_required_parameter, invalid_value, context_length_exceeded,
// json_too_deep, invalid_json, invalid_utf8, model_not_found, not_found, ...; internal_error
// for 500s.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: error_body picks one from http_status (never null)
};

// Never has a null `code`: an empty one becomes the generic code of http_status
// (invalid_value for 400, internal_error for 5xx, ...). Strings may hold invalid UTF-8 (they can
// quote the request): serialize with error_handler_t::replace.
nlohmann::json error_body(const ApiError& e);
ApiError not_found_error(std::string_view path);
// vLLM's answer to an unknown `model`: 404 invalid_request_error, param "model",
// code "model_not_found".
ApiError model_not_found_error(std::string_view name);
ApiError unauthorized_error();
ApiError body_too_large_error(size_t limit);
ApiError malformed_json_error(std::string_view what);
ApiError invalid_utf8_error(size_t offset);
// 400 json_too_deep, naming kMaxJsonDepth.
ApiError json_too_deep_error();
// Maps an engine/recipe Status to an error; invalid input is 400, the rest 500 (internal_error).
// `param` empty: recovered from the message's leading field name ("stop[1] must ..." -> "stop",
// "top_p must ..." -> "top_p"). The engine's "prompt (N tokens) + max_tokens (M) exceeds
// max_model_len (L)" becomes param "max_tokens", code "context_length_exceeded". Codes:
// invalid_type for "X must be <type>, got <json type>", otherwise invalid_value.
ApiError error_from_status(const Status& st, std::string param = {});

// Depth of the deepest array/object in `body` (0 for a scalar), scanning bytes only: brackets
// inside strings (escapes honoured) do not count. Stops counting once past `limit`, returning
// limit + 1. Malformed JSON gives some depth; the parser rejects it afterwards.
int json_nesting_depth(std::string_view body, int limit = kMaxJsonDepth);

// One completions prompt: text, or token ids when `is_ids`.
struct PromptInput {
  bool is_ids = false;
  std::string text;
  std::vector<int32_t> ids;
};

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  // The first (or only) prompt is also in gen.prompt / gen.prompt_ids; request_for_prompt()
  // builds the request of each prompt of a batch.
  GenerateRequest gen;
  // Completions: every prompt, in order (1..kMaxChoices / n). A list of strings or a list of
  // token-id lists is a batch; a string or a flat list of ids is one prompt. Empty for chat.
  std::vector<PromptInput> prompts;
  bool echo = false;  // completions: prepend each prompt's text to its choices (no logprobs)
  std::string model;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool thinking = false;          // chat: the recipe's thinking mode, to parse the output
  bool max_tokens_given = false;  // max_tokens or max_completion_tokens
  bool response_format = false;   // json_object/json_schema became gen.params.so_args
  // Chat: parse DSML tool calls out of the output. True iff the request offers tools and
  // tool_choice is not "none"; otherwise markup stays in the content.
  bool parse_tool_calls = false;
  // The served model's chat format (Engine::chat_variant): the prompt, a forced call's grammar
  // and the output parsers all use it.
  recipe::Variant variant = recipe::Variant::kV41;
};

// The text of one token, for logprobs (the engine's detokenizer).
using TokenText = std::function<std::string(int32_t)>;

// Parses and type-checks a request body. Known fields of the wrong type and invalid sampling
// params give a 400 naming the field in `param`; unknown fields are ignored (as OpenAI does).
// Range checks need the vocab size and chat requests the chat format: pass the engine's. Bodies
// nested deeper than kMaxJsonDepth are refused (json_too_deep) before parsing; the parsed body is
// moved, never deep-copied, into gen.chat. Never throws.
bool parse_request(Endpoint endpoint, std::string_view body, int64_t vocab_size,
                   recipe::Variant variant, ParsedRequest* out, ApiError* error);

// Engine submit errors in the request's terms: grammar errors ("so_args ...") name
// response_format or tool_choice when the grammar came from one of them, and the rest go
// through error_from_status.
ApiError error_from_status(const Status& st, const ParsedRequest& req);

// req.gen with prompt i of req.prompts as its prompt (completions batches: one engine request
// per prompt, each with req.gen.params.n samples).
GenerateRequest request_for_prompt(const ParsedRequest& req, size_t i);

// Characters (Unicode code points, as Python's len(str)) in UTF-8 text: bytes that are not
// continuation bytes (10xxxxxx). For echo, the caller starts text_offset at the prompt's count.
int64_t count_chars(std::string_view utf8);

// Usage as both OpenAI and DeepSeek report it; always every field.
nlohmann::json usage_json(const Usage& u, int64_t completion_tokens, int64_t reasoning_tokens);

// The assistant message of a chat completion: strict parser first, the lenient streaming
// parser when the text is not well formed (the tiny model's output is random).
// `parse_tool_calls` off: DSML markup stays in the content (ParsedRequest::parse_tool_calls).
recipe::ParsedMessage parse_chat_output(const std::string& text, bool thinking,
                                        recipe::Variant variant, bool parse_tool_calls = true);

// Logprobs in each endpoint's shape: chat {"content": [{token, logprob, bytes, top_logprobs}]},
// completions {tokens, token_logprobs, top_logprobs, text_offset}.
// text_offset counts characters (code points, as OpenAI and vLLM do), not bytes. `*text_offset`
// is the running count of characters begun by the choice's bytes so far (start it at 0, or at
// count_chars(prompt) when echoing); each token advances it by the characters its bytes begin.
// A token may hold part of a character: one that starts inside a character (its first byte is a
// continuation byte) is at that character's index. So offsets never decrease and, for valid
// UTF-8 output, each is the index in the choice's `text` of the character holding the token's
// first byte. (A stray continuation byte, which the JSON output shows as U+FFFD, adds nothing.)
nlohmann::json chat_logprobs(std::span<const TokenLogprobs> lps, const TokenText& token_text);
nlohmann::json completion_logprobs(std::span<const TokenLogprobs> lps, const TokenText& token_text,
                                   int64_t* text_offset);

// Full (non-streaming) responses. `reasoning_tokens` is counted by the caller (it needs the
// tokenizer); `token_text` is needed only when logprobs were requested.
// Completions over a batch: `outs` holds one finished RequestOutput per prompt, in prompt order,
// each with samples 0..n-1; choice `index` is prompt_index * n + sample index (as OpenAI and
// vLLM number them) and usage sums over the prompts. `echo_texts`: empty, or each prompt's text,
// prepended to that prompt's choices (echo).
nlohmann::json completion_response(const std::string& id, int64_t created, const std::string& model,
                                   std::span<const RequestOutput> outs, int n,
                                   std::span<const std::string> echo_texts = {},
                                   const TokenText& token_text = {});
// One prompt, no echo.
nlohmann::json completion_response(const std::string& id, int64_t created, const std::string& model,
                                   const RequestOutput& out, const TokenText& token_text = {});
nlohmann::json chat_response(const std::string& id, int64_t created, const std::string& model,
                             const RequestOutput& out, bool thinking, int64_t reasoning_tokens,
                             recipe::Variant variant, const TokenText& token_text = {},
                             bool parse_tool_calls = true);

// Streaming chunks. `index` is the choice's global index, prompt_index * n + sample index.
nlohmann::json completion_chunk(const std::string& id, int64_t created, const std::string& model,
                                int index, const std::string& delta_text,
                                const std::optional<std::string>& finish_reason,
                                const nlohmann::json& logprobs = nullptr);
// `first` adds role: "assistant"; tool-call deltas that carry a name get a type and a fresh
// random id "call_..." (one per call: the name comes once, in the call's first delta).
nlohmann::json chat_chunk(const std::string& id, int64_t created, const std::string& model,
                          int index, const recipe::StreamDelta& delta, bool first,
                          const std::optional<std::string>& finish_reason,
                          const nlohmann::json& logprobs = nullptr);
// The final usage-only chunk of stream_options.include_usage (choices is empty).
nlohmann::json usage_chunk(const std::string& id, int64_t created, const std::string& model,
                           Endpoint endpoint, const nlohmann::json& usage);

std::string sse_event(const nlohmann::json& j);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// GET /v1/models: one entry per served name (aliases included), in order.
nlohmann::json models_response(const std::vector<std::string>& ids, int64_t created);
// GET /v1/models/{id}: the one model object.
nlohmann::json model_response(const std::string& id, int64_t created);

}  // namespace deepinfer::server

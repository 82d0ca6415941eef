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

// An OpenAI-style error: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
};

nlohmann::json error_body(const ApiError& e);
ApiError not_found_error(std::string_view path);
ApiError unauthorized_error();
ApiError body_too_large_error(size_t limit);
ApiError malformed_json_error(std::string_view what);
ApiError invalid_utf8_error(size_t offset);
// Maps an engine/recipe Status to an error; invalid input is 400, the rest 500.
ApiError error_from_status(const Status& st, std::string param = {});

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  GenerateRequest gen;
  std::string model;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool thinking = false;          // chat: the recipe's thinking mode, to parse the output
  bool max_tokens_given = false;  // max_tokens or max_completion_tokens
  bool response_format = false;   // json_object/json_schema became gen.params.so_args
};

// The text of one token, for logprobs (the engine's detokenizer).
using TokenText = std::function<std::string(int32_t)>;

// Parses and type-checks a request body. Known fields of the wrong type and invalid sampling
// params give a 400 naming the field in `param`; unknown fields are ignored (as OpenAI does).
// Range checks need the vocab size: pass the engine's.
bool parse_request(Endpoint endpoint, std::string_view body, int64_t vocab_size, ParsedRequest* out,
                   ApiError* error);

// Usage as both OpenAI and DeepSeek report it; always every field.
nlohmann::json usage_json(const Usage& u, int64_t completion_tokens, int64_t reasoning_tokens);

// The assistant message of a chat completion: strict parser first, the lenient streaming
// parser when the text is not well formed (the tiny model's output is random).
recipe::ParsedMessage parse_chat_output(const std::string& text, bool thinking);

// Logprobs in each endpoint's shape: chat {"content": [{token, logprob, bytes, top_logprobs}]},
// completions {tokens, token_logprobs, top_logprobs, text_offset}. `*text_offset` is where the
// first token starts in the choice's text and is advanced past the last one.
nlohmann::json chat_logprobs(std::span<const TokenLogprobs> lps, const TokenText& token_text);
nlohmann::json completion_logprobs(std::span<const TokenLogprobs> lps, const TokenText& token_text,
                                   int64_t* text_offset);

// Full (non-streaming) responses. `reasoning_tokens` is counted by the caller (it needs the
// tokenizer); `token_text` is needed only when logprobs were requested.
nlohmann::json completion_response(const std::string& id, int64_t created, const std::string& model,
                                   const RequestOutput& out, const TokenText& token_text = {});
nlohmann::json chat_response(const std::string& id, int64_t created, const std::string& model,
                             const RequestOutput& out, bool thinking, int64_t reasoning_tokens,
                             const TokenText& token_text = {});

// Streaming chunks.
nlohmann::json completion_chunk(const std::string& id, int64_t created, const std::string& model,
                                int index, const std::string& delta_text,
                                const std::optional<std::string>& finish_reason,
                                const nlohmann::json& logprobs = nullptr);
// `first` adds role: "assistant"; tool-call deltas with a name get an id and type.
nlohmann::json chat_chunk(const std::string& id, int64_t created, const std::string& model,
                          int index, const recipe::StreamDelta& delta, bool first,
                          const std::optional<std::string>& finish_reason,
                          const nlohmann::json& logprobs = nullptr);
// The final usage-only chunk of stream_options.include_usage (choices is empty).
nlohmann::json usage_chunk(const std::string& id, int64_t created, const std::string& model,
                           Endpoint endpoint, const nlohmann::json& usage);

std::string sse_event(const nlohmann::json& j);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

nlohmann::json models_response(const std::string& model_id, int64_t created);

}  // namespace deepinfer::server

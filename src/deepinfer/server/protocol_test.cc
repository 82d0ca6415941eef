#include "deepinfer/server/protocol.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>

#include "deepinfer/model/deepseek_v4/tiny_model.h"
#include "deepinfer/server/random_id.h"

namespace deepinfer::server {
namespace {

using nlohmann::json;

constexpr int64_t kVocab = 1000;

ApiError parse_error(Endpoint ep, const std::string& body) {
  ParsedRequest req;
  ApiError err;
  EXPECT_FALSE(parse_request(ep, body, kVocab, &req, &err)) << body;
  return err;
}

TEST(Protocol, CompletionRequestMapsFields) {
  ParsedRequest req;
  ApiError err;
  ASSERT_TRUE(parse_request(Endpoint::kCompletions,
                            R"({"model":"m","prompt":"hi","max_tokens":7,"temperature":0,
                                "stream":true,"stream_options":{"include_usage":true},
                                "stop":"x","some_unknown_field":{"a":1}})",
                            kVocab, &req, &err))
      << err.message;
  EXPECT_EQ(req.model, "m");
  EXPECT_EQ(req.gen.prompt, "hi");
  EXPECT_EQ(req.gen.params.max_tokens, 7);
  EXPECT_EQ(req.gen.params.temperature, 0.0f);
  EXPECT_TRUE(req.stream);
  EXPECT_TRUE(req.include_usage);
  ASSERT_EQ(req.gen.params.stop.size(), 1u);
}

TEST(Protocol, PromptIdsAndMaxCompletionTokens) {
  ParsedRequest req;
  ApiError err;
  ASSERT_TRUE(parse_request(Endpoint::kCompletions,
                            R"({"prompt":[1,2,3],"max_tokens":3,"max_completion_tokens":5})",
                            kVocab, &req, &err));
  EXPECT_EQ(req.gen.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(req.gen.params.max_tokens, 5);
}

TEST(Protocol, ChatRequestKeepsBody) {
  ParsedRequest req;
  ApiError err;
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions,
                            R"({"messages":[{"role":"user","content":"hello"}]})", kVocab, &req,
                            &err))
      << err.message;
  ASSERT_TRUE(req.gen.chat.has_value());
  EXPECT_EQ((*req.gen.chat)["messages"][0]["content"], "hello");
}

TEST(Protocol, MalformedJsonIs400) {
  ApiError e = parse_error(Endpoint::kCompletions, "{\"prompt\": ");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.code, "invalid_json");
  e = parse_error(Endpoint::kCompletions, "[1,2]");
  EXPECT_EQ(e.http_status, 400);
}

TEST(Protocol, WrongTypeNamesTheField) {
  ApiError e = parse_error(Endpoint::kCompletions, R"({"prompt":"a","temperature":"hot"})");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "temperature");
  e = parse_error(Endpoint::kCompletions, R"({"prompt":"a","max_tokens":1.5})");
  EXPECT_EQ(e.param, "max_tokens");
  e = parse_error(Endpoint::kChatCompletions, R"({"messages":"hi"})");
  EXPECT_EQ(e.param, "messages");
  e = parse_error(Endpoint::kCompletions, R"({"prompt":"a","stream":"yes"})");
  EXPECT_EQ(e.param, "stream");
}

TEST(Protocol, InvalidSamplingParamsNameTheField) {
  ApiError e = parse_error(Endpoint::kCompletions, R"({"prompt":"a","top_p":1.5})");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "top_p");
  e = parse_error(Endpoint::kCompletions, R"({"prompt":"a","n":0})");
  EXPECT_EQ(e.param, "n");
}

TEST(Protocol, MissingPromptOrMessages) {
  EXPECT_EQ(parse_error(Endpoint::kCompletions, "{}").param, "prompt");
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions, "{}").param, "messages");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt":[1,99999]})").param, "prompt");
}

TEST(Protocol, ErrorBodyShape) {
  json b = error_body(unauthorized_error());
  ASSERT_TRUE(b.contains("error"));
  EXPECT_EQ(b["error"]["type"], "authentication_error");
  EXPECT_TRUE(b["error"]["param"].is_null());
  EXPECT_EQ(unauthorized_error().http_status, 401);
  EXPECT_EQ(not_found_error("/x").http_status, 404);
  EXPECT_EQ(body_too_large_error(10).http_status, 413);
  EXPECT_EQ(error_from_status(internal_error("boom")).http_status, 500);
  EXPECT_EQ(error_from_status(invalid_argument("bad")).http_status, 400);
}

TEST(Protocol, UsageHasEveryField) {
  Usage u;
  u.prompt_tokens = 10;
  u.cached_tokens = 4;
  json j = usage_json(u, 5, 2);
  EXPECT_EQ(j["total_tokens"], 15);
  EXPECT_EQ(j["prompt_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(j["completion_tokens_details"]["reasoning_tokens"], 2);
  EXPECT_EQ(j["prompt_cache_hit_tokens"], 4);
  EXPECT_EQ(j["prompt_cache_miss_tokens"], 6);
}

RequestOutput make_output(const std::string& text, int tokens) {
  RequestOutput out;
  out.request_id = "r";
  out.finished = true;
  out.usage.prompt_tokens = 3;
  CompletionOutput c;
  c.text = text;
  c.token_ids.assign(tokens, 1);
  c.finish_reason = "stop";
  out.outputs.push_back(c);
  return out;
}

TEST(Protocol, CompletionResponse) {
  json r = completion_response("cmpl-1", 100, "m", make_output("abc", 2));
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], "abc");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r["usage"]["completion_tokens"], 2);
  EXPECT_EQ(r["usage"]["total_tokens"], 5);
}

TEST(Protocol, ChatResponseSplitsReasoning) {
  json r = chat_response("chatcmpl-1", 100, "m", make_output("think</think>answer", 4), true, 1);
  const json& msg = r["choices"][0]["message"];
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["reasoning_content"], "think");
  EXPECT_EQ(msg["content"], "answer");
  EXPECT_EQ(r["usage"]["completion_tokens_details"]["reasoning_tokens"], 1);
}

TEST(Protocol, ChatResponseWithoutThinkingIsContent) {
  json r = chat_response("chatcmpl-1", 100, "m", make_output("plain text", 2), false, 0);
  EXPECT_EQ(r["choices"][0]["message"]["content"], "plain text");
  EXPECT_FALSE(r["choices"][0]["message"].contains("reasoning_content"));
}

TEST(Protocol, ChatChunkShapes) {
  recipe::StreamDelta d;
  d.content = "he";
  json c = chat_chunk("id", 1, "m", 0, d, true, std::nullopt);
  EXPECT_EQ(c["object"], "chat.completion.chunk");
  EXPECT_EQ(c["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(c["choices"][0]["delta"]["content"], "he");
  EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  recipe::StreamDelta t;
  t.tool_calls.push_back({0, "get_weather", "{\"a\""});
  c = chat_chunk("id", 1, "m", 0, t, false, std::string("tool_calls"));
  const json& call = c["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "tool_calls");
}

TEST(Protocol, SseFraming) {
  std::string e = sse_event(json{{"a", 1}});
  EXPECT_EQ(e, "data: {\"a\":1}\n\n");
  // Invalid UTF-8 from the model must not throw.
  std::string bad = sse_event(json{{"t", std::string("\xff")}});
  EXPECT_EQ(bad.rfind("data: ", 0), 0u);
  json u = usage_chunk("id", 1, "m", Endpoint::kChatCompletions, usage_json(Usage{}, 0, 0));
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_TRUE(u.contains("usage"));
}

TEST(Protocol, InvalidUtf8IsNamedAsSuch) {
  std::string body = "{\"prompt\":\"a\xff\"}";
  ApiError e = parse_error(Endpoint::kCompletions, body);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.code, "invalid_utf8");
  // Overlong "/" and a lone surrogate are not UTF-8 either.
  EXPECT_EQ(parse_error(Endpoint::kCompletions, "{\"prompt\":\"\xc0\xaf\"}").code, "invalid_utf8");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, "{\"prompt\":\"\xed\xa0\x80\"}").code,
            "invalid_utf8");
  ParsedRequest req;
  ApiError err;
  EXPECT_TRUE(parse_request(Endpoint::kCompletions, "{\"prompt\":\"é日😀\"}", kVocab, &req, &err))
      << err.message;
}

TEST(Protocol, LogprobsPerEndpoint) {
  ParsedRequest req;
  ApiError err;
  const std::string msgs = R"("messages":[{"role":"user","content":"x"}])";
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions,
                            "{" + msgs + R"(,"logprobs":true,"top_logprobs":3})", kVocab, &req,
                            &err))
      << err.message;
  EXPECT_EQ(req.gen.params.logprobs, 3);
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions, "{" + msgs + R"(,"logprobs":false})",
                            kVocab, &req, &err));
  EXPECT_FALSE(req.gen.params.logprobs.has_value());
  ASSERT_TRUE(
      parse_request(Endpoint::kCompletions, R"({"prompt":"x","logprobs":2})", kVocab, &req, &err));
  EXPECT_EQ(req.gen.params.logprobs, 2);
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions, "{" + msgs + R"(,"logprobs":2})").param,
            "logprobs");
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions, "{" + msgs + R"(,"top_logprobs":2})").param,
            "top_logprobs");
  EXPECT_EQ(
      parse_error(Endpoint::kChatCompletions, "{" + msgs + R"(,"logprobs":true,"top_logprobs":21})")
          .param,
      "top_logprobs");
}

TEST(Protocol, ResponseFormatAndN) {
  ParsedRequest req;
  ApiError err;
  const std::string msgs = R"("messages":[{"role":"user","content":"x"}])";
  EXPECT_TRUE(parse_request(Endpoint::kChatCompletions,
                            "{" + msgs + R"(,"response_format":{"type":"text"},"n":3})", kVocab,
                            &req, &err))
      << err.message;
  EXPECT_EQ(req.gen.params.n, 3);
  // json_object / json_schema become so_args, and chat thinking is switched off for them.
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions,
                            "{" + msgs + R"(,"response_format":{"type":"json_object"}})", kVocab,
                            &req, &err))
      << err.message;
  ASSERT_TRUE(req.gen.params.so_args.has_value());
  EXPECT_EQ(req.gen.params.so_args->kind, sample::StructuredOutput::Kind::kJsonObject);
  EXPECT_FALSE(req.thinking);
  EXPECT_EQ((*req.gen.chat)["chat_template_kwargs"]["thinking"], false);
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions,
                            "{" + msgs +
                                R"(,"response_format":{"type":"json_schema","json_schema":
                                  {"name":"x","schema":{"type":"object","properties":
                                  {"zeta":{"type":"string"},"alpha":{"type":"integer"}}}}}})",
                            kVocab, &req, &err))
      << err.message;
  ASSERT_TRUE(req.gen.params.so_args.has_value());
  EXPECT_EQ(req.gen.params.so_args->kind, sample::StructuredOutput::Kind::kJsonSchema);
  // Property order as written (it is the order the grammar generates keys in).
  EXPECT_LT(req.gen.params.so_args->spec.find("zeta"), req.gen.params.so_args->spec.find("alpha"));
  EXPECT_EQ(
      parse_error(Endpoint::kChatCompletions, "{" + msgs +
                                                  R"(,"response_format":{"type":"json_object"},
                               "chat_template_kwargs":{"thinking":true}})")
          .param,
      "response_format");
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions,
                        "{" + msgs + R"(,"response_format":{"type":"json_schema"}})")
                .param,
            "response_format.json_schema");
  EXPECT_EQ(
      parse_error(Endpoint::kChatCompletions, "{" + msgs + R"(,"response_format":{"type":"yaml"}})")
          .param,
      "response_format.type");
  EXPECT_EQ(
      parse_error(Endpoint::kChatCompletions, "{" + msgs + R"(,"response_format":"json"})").param,
      "response_format");
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions, "{" + msgs + R"(,"n":1000})").param, "n");
}

TEST(Protocol, DeepSeekThinkingSwitch) {
  const std::string head = R"({"messages":[{"role":"user","content":"x"}])";
  ParsedRequest req;
  ApiError err;
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions,
                            head + R"(,"thinking":{"type":"disabled"}})", kVocab, &req, &err))
      << err.message;
  EXPECT_FALSE(req.thinking);
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions, head + R"(,"thinking":{"type":"enabled"}})",
                            kVocab, &req, &err))
      << err.message;
  EXPECT_TRUE(req.thinking);
  EXPECT_EQ(
      parse_error(Endpoint::kChatCompletions, head + R"(,"thinking":{"type":"maybe"}})").param,
      "thinking");
  // Thinking switched off explicitly goes with structured output; switched on it is a 400.
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions, head + R"(,"thinking":{"type":"disabled"},
                                      "response_format":{"type":"json_object"}})",
                            kVocab, &req, &err))
      << err.message;
  EXPECT_FALSE(req.thinking);
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions, head + R"(,"thinking":{"type":"enabled"},
                                  "response_format":{"type":"json_object"}})")
                .param,
            "response_format");
}

TEST(Protocol, ToolChoice) {
  const std::string head =
      R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function",
          "function":{"name":"f","parameters":{"type":"object"}}}])";
  ParsedRequest req;
  ApiError err;
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions, head + R"(,"tool_choice":"auto"})", kVocab,
                            &req, &err))
      << err.message;
  EXPECT_TRUE(req.gen.chat->contains("tools"));
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions, head + R"(,"tool_choice":"none"})", kVocab,
                            &req, &err))
      << err.message;
  EXPECT_FALSE(req.gen.chat->contains("tools"));
  // "required" and named functions: ForcedToolChoice* below.
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions,
                        head + R"(,"tool_choice":{"type":"function","function":{"name":"g"}}})")
                .param,
            "tool_choice");
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions, head + R"(,"tool_choice":7})").param,
            "tool_choice");
}

TEST(Protocol, LogprobsShapes) {
  std::vector<TokenLogprobs> lps = {{5, -0.5f, {{5, -0.5f}, {6, -1.5f}}},
                                    {6, -std::numeric_limits<float>::infinity(), {}}};
  TokenText text = [](int32_t id) { return id == 5 ? std::string("ab") : std::string("c"); };
  json chat = chat_logprobs(lps, text);
  ASSERT_EQ(chat["content"].size(), 2u);
  EXPECT_EQ(chat["content"][0]["token"], "ab");
  EXPECT_EQ(chat["content"][0]["bytes"], json::array({97, 98}));
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["token"], "c");
  EXPECT_DOUBLE_EQ(chat["content"][1]["logprob"].get<double>(), -9999.0);  // -inf is not JSON
  int64_t offset = 10;
  json cmpl = completion_logprobs(lps, text, &offset);
  EXPECT_EQ(cmpl["tokens"], json::array({"ab", "c"}));
  EXPECT_EQ(cmpl["text_offset"], json::array({10, 12}));
  EXPECT_EQ(offset, 13);
  EXPECT_DOUBLE_EQ(cmpl["top_logprobs"][0]["c"].get<double>(), -1.5);
}

TEST(Protocol, ReasoningTokensNeverExceedCompletionTokens) {
  json u = usage_json(Usage{10, 3, 0}, 3, 7);
  EXPECT_EQ(u["completion_tokens_details"]["reasoning_tokens"], 3);
}

// --- Issue 14: nesting depth, error fields, text_offset, ids, validation, models, batches ---

// `depth` nested arrays inside a completions request: the body's depth is depth + 1.
std::string nested_completion(int depth, bool closed = true) {
  std::string body = R"({"prompt":"x","extra":)" + std::string(depth, '[');
  if (closed) body += std::string(depth, ']') + "}";
  return body;
}

TEST(Protocol, NestingAtTheLimitIsAcceptedAndOneDeeperIsRefused) {
  ParsedRequest req;
  ApiError err;
  EXPECT_TRUE(parse_request(Endpoint::kCompletions, nested_completion(kMaxJsonDepth - 1), kVocab,
                            &req, &err))
      << err.message;
  ApiError e = parse_error(Endpoint::kCompletions, nested_completion(kMaxJsonDepth));
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.code, "json_too_deep");
  EXPECT_NE(e.message.find(std::to_string(kMaxJsonDepth)), std::string::npos) << e.message;
}

TEST(Protocol, TooDeepIsRefusedBeforeParsing) {
  // Truncated JSON: a parser would call it malformed; the depth scan answers first.
  EXPECT_EQ(parse_error(Endpoint::kCompletions, nested_completion(kMaxJsonDepth, false)).code,
            "json_too_deep");
}

TEST(Protocol, DepthScanIgnoresBracketsInStrings) {
  const std::string brackets(5000, '[');
  ParsedRequest req;
  ApiError err;
  // Escaped quotes and backslashes do not end the string early.
  const std::string body = R"({"prompt":"\"\\)" + brackets + R"(\"","stop":"\\"})";
  ASSERT_TRUE(parse_request(Endpoint::kCompletions, body, kVocab, &req, &err)) << err.message;
  EXPECT_EQ(req.gen.prompt, "\"\\" + brackets + "\"");
  EXPECT_EQ(json_nesting_depth(body), 1);
  EXPECT_EQ(json_nesting_depth("[{\"a\":[1]},[]]"), 3);
  EXPECT_EQ(json_nesting_depth("7"), 0);
  EXPECT_EQ(json_nesting_depth(std::string(100, '['), 10), 11);
}

TEST(Protocol, HugeNestingDoesNotCrash) {
  // The audit's bodies: 100k deep in a chat message (200 KB) and 1M deep in a completions
  // field (2 MB).
  const int chat_depth = 100'000, cmpl_depth = 1'000'000;
  std::string chat = R"({"messages":[{"role":"user","content":)" + std::string(chat_depth, '[') +
                     std::string(chat_depth, ']') + "}]}";
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions, chat).code, "json_too_deep");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, nested_completion(cmpl_depth)).code,
            "json_too_deep");
}

TEST(Protocol, EveryKnownFieldOfTheWrongTypeIsInvalidTypeNamingIt) {
  // A value of a type no known field accepts at the top level... except the objects, which get
  // a number.
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"model", "1"},
      {"prompt", "1"},
      {"stream", "1"},
      {"stream_options", "1"},
      {"max_tokens", "\"x\""},
      {"max_completion_tokens", "\"x\""},
      {"min_tokens", "\"x\""},
      {"n", "\"x\""},
      {"temperature", "\"x\""},
      {"top_p", "\"x\""},
      {"top_k", "\"x\""},
      {"min_p", "\"x\""},
      {"presence_penalty", "\"x\""},
      {"frequency_penalty", "\"x\""},
      {"repetition_penalty", "\"x\""},
      {"seed", "\"x\""},
      {"stop", "1"},
      {"stop_token_ids", "1"},
      {"logit_bias", "1"},
      {"ignore_eos", "1"},
      {"skip_special_tokens", "1"},
      {"include_stop_str_in_output", "1"},
      {"user", "1"},
      {"priority", "\"x\""},
      {"response_format", "1"},
      {"echo", "1"},
      {"logprobs", "\"x\""}};
  for (const auto& [name, value] : fields) {
    const std::string body = R"({"prompt":"a",")" + name + "\":" + value + "}";
    ApiError e = parse_error(Endpoint::kCompletions, body);
    EXPECT_EQ(e.http_status, 400) << body;
    EXPECT_EQ(e.param, name) << body;
    EXPECT_EQ(e.code, "invalid_type") << body << ": " << e.message;
  }
  const std::string msgs = R"({"messages":[{"role":"user","content":"x"}],)";
  for (const char* f : {R"("messages":{})", R"("tools":{})", R"("logprobs":1)",
                        R"("top_logprobs":"x","logprobs":true)"}) {
    ApiError e = parse_error(Endpoint::kChatCompletions, msgs + f + "}");
    EXPECT_EQ(e.code, "invalid_type") << f << ": " << e.message;
    EXPECT_FALSE(e.param.empty()) << f;
  }
}

TEST(Protocol, StopErrorsNameStop) {
  for (const char* stop : {R"(["a",3])", R"(["ok",""])", "5", R"([["a"]])"}) {
    ApiError e =
        parse_error(Endpoint::kCompletions, std::string(R"({"prompt":"a","stop":)") + stop + "}");
    EXPECT_EQ(e.param, "stop") << stop << ": " << e.message;
    EXPECT_FALSE(e.code.empty()) << stop;
  }
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt":"a","stop":["a",3]})").code,
            "invalid_type");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt":"a","stop":["ok",""]})").code,
            "invalid_value");
  EXPECT_EQ(
      parse_error(Endpoint::kCompletions, R"({"prompt":"a","stop_token_ids":[1,5000]})").param,
      "stop_token_ids");
}

TEST(Protocol, ContextOverflowNamesMaxTokens) {
  // The engine's submit error, as engine.cc words it.
  ApiError e = error_from_status(
      invalid_argument("prompt (12 tokens) + max_tokens (100) exceeds max_model_len (64)"));
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_EQ(e.code, "context_length_exceeded");
  // Other prompt errors stay on prompt.
  EXPECT_EQ(error_from_status(invalid_argument("prompt is empty")).param, "prompt");
}

TEST(Protocol, GrammarErrorsNameResponseFormatWhenItWasUsed) {
  const Status grammar = invalid_argument("so_args.json_schema: pattern '(?é)' is not supported");
  ParsedRequest req;
  req.response_format = true;
  ApiError e = error_from_status(grammar, req);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "response_format");
  EXPECT_EQ(e.code, "invalid_value");
  req.response_format = false;  // the client sent so_args itself
  EXPECT_EQ(error_from_status(grammar, req).param, "so_args");
  req.gen.chat = json{{"tool_choice", "required"}};  // the forced call's grammar
  EXPECT_EQ(error_from_status(grammar, req).param, "tool_choice");
  req.gen.chat = json{{"tool_choice", "auto"}};
  EXPECT_EQ(error_from_status(grammar, req).param, "so_args");
  EXPECT_EQ(error_from_status(invalid_argument("top_p must be in (0, 1], got 2"), req).param,
            "top_p");
}

TEST(Protocol, ErrorCodesByKind) {
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt":"a","top_p":1.5})").code,
            "invalid_value");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, "{}").code, "missing_required_parameter");
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions, "{}").code, "missing_required_parameter");
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions, R"({"messages":[]})").code, "invalid_value");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt":"a","n":1000})").code,
            "invalid_value");
  ApiError internal = error_from_status(internal_error("boom"));
  EXPECT_EQ(internal.http_status, 500);
  EXPECT_EQ(internal.code, "internal_error");
}

TEST(Protocol, ErrorBodyNeverHasANullCode) {
  for (int status : {400, 401, 403, 404, 408, 409, 413, 415, 429, 500, 503}) {
    ApiError e;
    e.http_status = status;
    e.message = "m";
    json b = error_body(e);
    ASSERT_TRUE(b["error"]["code"].is_string()) << status;
    EXPECT_FALSE(b["error"]["code"].get<std::string>().empty()) << status;
  }
  EXPECT_EQ(error_body(error_from_status(internal_error("x")))["error"]["code"], "internal_error");
  EXPECT_EQ(error_body(malformed_json_error("x"))["error"]["code"], "invalid_json");
}

TEST(Protocol, TextOffsetCountsCharactersNotBytes) {
  // "é" is 2 bytes, "日本" 6, "😀" 4: one, two and one characters.
  std::vector<TokenLogprobs> lps = {{1, -1, {}}, {2, -1, {}}, {3, -1, {}}, {4, -1, {}}};
  TokenText text = [](int32_t id) {
    switch (id) {
      case 1:
        return std::string("é");
      case 2:
        return std::string("日本");
      case 3:
        return std::string("😀");
      default:
        return std::string("a");
    }
  };
  int64_t offset = 0;
  json j = completion_logprobs(lps, text, &offset);
  EXPECT_EQ(j["text_offset"], json::array({0, 1, 3, 4}));
  EXPECT_EQ(offset, 5);
  EXPECT_EQ(count_chars("é日本😀a"), 5);
}

TEST(Protocol, TextOffsetOfPartialCharactersIsTheCharacterIndex) {
  // "日" (E6 97 A5) split over two tokens, then "x": the returned text is "日x" (2 characters).
  std::vector<TokenLogprobs> lps = {{1, -1, {}}, {2, -1, {}}, {3, -1, {}}};
  TokenText text = [](int32_t id) {
    return id == 1 ? std::string("\xE6\x97") : id == 2 ? std::string("\xA5") : std::string("x");
  };
  int64_t offset = 0;
  json j = completion_logprobs(lps, text, &offset);
  // The second token starts inside "日", at index 0; "x" is at index 1.
  EXPECT_EQ(j["text_offset"], json::array({0, 0, 1}));
  EXPECT_EQ(offset, 2);
  // Streaming the same tokens one update at a time gives the same offsets.
  int64_t streamed = 0;
  json all = json::array();
  for (size_t i = 0; i < lps.size(); ++i) {
    json part = completion_logprobs(std::span(lps).subspan(i, 1), text, &streamed);
    for (const json& o : part["text_offset"]) all.push_back(o);
  }
  EXPECT_EQ(all, j["text_offset"]);
}

TEST(Protocol, RandomIdsAreUniqueAndNotSequential) {
  constexpr int kIds = 10000;
  std::set<std::string> seen;
  std::vector<std::string> ids;
  for (int i = 0; i < kIds; ++i) {
    std::string id = random_id("call_");
    ASSERT_EQ(id.rfind("call_", 0), 0u) << id;
    ASSERT_EQ(id.size(), 5 + kRandomIdChars);
    for (char c : id.substr(5)) ASSERT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << id;
    seen.insert(id);
    ids.push_back(id);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kIds));
  // A counter (or any sequence) would make every next id compare greater; random ids do about
  // half the time (±20 standard deviations here).
  int increasing = 0;
  for (int i = 1; i < kIds; ++i) increasing += ids[i] > ids[i - 1];
  EXPECT_GT(increasing, kIds * 4 / 10);
  EXPECT_LT(increasing, kIds * 6 / 10);
}

TEST(Protocol, ToolCallIdsAreRandomAndDifferAcrossChoices) {
  const std::string call =
      "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"k\" "
      "string=\"true\">v</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  RequestOutput out = make_output(call, 3);
  CompletionOutput second = out.outputs[0];
  second.index = 1;
  out.outputs.push_back(second);
  json r = chat_response("chatcmpl-x", 1, "m", out, false, 0);
  ASSERT_EQ(r["choices"].size(), 2u);
  std::set<std::string> ids;
  for (const json& c : r["choices"]) {
    ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << r.dump();
    const std::string id = c["message"]["tool_calls"][0]["id"];
    EXPECT_EQ(id.rfind("call_", 0), 0u) << id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 2u);
  // Streamed: each call's first delta (the one with the name) gets its own id.
  recipe::StreamDelta d;
  d.tool_calls.push_back({0, "f", ""});
  const std::string a =
      chat_chunk("id", 1, "m", 0, d, false, {})["choices"][0]["delta"]["tool_calls"][0]["id"];
  const std::string b =
      chat_chunk("id", 1, "m", 1, d, false, {})["choices"][0]["delta"]["tool_calls"][0]["id"];
  EXPECT_EQ(a.rfind("call_", 0), 0u);
  EXPECT_NE(a, b);
  recipe::StreamDelta args;
  args.tool_calls.push_back({0, "", "{}"});
  EXPECT_FALSE(
      chat_chunk("id", 1, "m", 0, args, false, {})["choices"][0]["delta"]["tool_calls"][0].contains(
          "id"));
}

TEST(Protocol, UserMessageWithoutContentNamesIt) {
  ApiError e = parse_error(Endpoint::kChatCompletions, R"({"messages":[{"role":"user"}]})");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "messages[0].content");
  EXPECT_EQ(e.code, "missing_required_parameter");
  e = parse_error(Endpoint::kChatCompletions,
                  R"({"messages":[{"role":"system","content":"s"},
                                  {"role":"user","content":null}]})");
  EXPECT_EQ(e.param, "messages[1].content");
  // An empty string is content.
  ParsedRequest req;
  ApiError err;
  EXPECT_TRUE(parse_request(Endpoint::kChatCompletions,
                            R"({"messages":[{"role":"user","content":""}]})", kVocab, &req, &err))
      << err.message;
}

TEST(Protocol, ModelsListEveryAliasAndRetrieveOne) {
  json list = models_response({"deepseek-v4", "dsv4"}, 42);
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 2u);
  EXPECT_EQ(list["data"][0]["id"], "deepseek-v4");
  EXPECT_EQ(list["data"][1]["id"], "dsv4");
  for (const json& m : list["data"]) {
    EXPECT_EQ(m["object"], "model");
    EXPECT_EQ(m["created"], 42);
    EXPECT_TRUE(m["owned_by"].is_string());
  }
  json one = model_response("dsv4", 42);
  EXPECT_EQ(one, list["data"][1]);
  ApiError e = model_not_found_error("gpt-9");
  EXPECT_EQ(e.http_status, 404);
  json b = error_body(e);
  EXPECT_EQ(b["error"]["type"], "invalid_request_error");
  EXPECT_EQ(b["error"]["param"], "model");
  EXPECT_EQ(b["error"]["code"], "model_not_found");
  EXPECT_NE(b["error"]["message"].get<std::string>().find("gpt-9"), std::string::npos);
}

TEST(Protocol, BatchedPrompts) {
  ParsedRequest req;
  ApiError err;
  ASSERT_TRUE(parse_request(Endpoint::kCompletions, R"({"prompt":["a","bc","d"],"n":2})", kVocab,
                            &req, &err))
      << err.message;
  ASSERT_EQ(req.prompts.size(), 3u);
  EXPECT_EQ(req.prompts[1].text, "bc");
  EXPECT_FALSE(req.prompts[1].is_ids);
  EXPECT_EQ(req.gen.prompt, "a");  // the first prompt, for single-prompt callers
  GenerateRequest g = request_for_prompt(req, 2);
  EXPECT_EQ(g.prompt, "d");
  EXPECT_EQ(g.params.n, 2);

  ASSERT_TRUE(
      parse_request(Endpoint::kCompletions, R"({"prompt":[[1,2],[3]]})", kVocab, &req, &err))
      << err.message;
  ASSERT_EQ(req.prompts.size(), 2u);
  EXPECT_TRUE(req.prompts[1].is_ids);
  EXPECT_EQ(req.prompts[1].ids, std::vector<int32_t>{3});
  g = request_for_prompt(req, 1);
  EXPECT_FALSE(g.prompt.has_value());
  EXPECT_EQ(g.prompt_ids, std::vector<int32_t>{3});

  // A flat list of ids stays one prompt.
  ASSERT_TRUE(parse_request(Endpoint::kCompletions, R"({"prompt":[4,5,6]})", kVocab, &req, &err));
  ASSERT_EQ(req.prompts.size(), 1u);
  EXPECT_EQ(req.prompts[0].ids, (std::vector<int32_t>{4, 5, 6}));

  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt":[]})").param, "prompt");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt":["a",1]})").code, "invalid_type");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt":[[1],"a"]})").code, "invalid_type");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt":[[1],[]]})").param, "prompt");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt":[[1],[99999]]})").code,
            "invalid_value");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt":[{"a":1}]})").code, "invalid_type");
}

TEST(Protocol, BatchSizeIsBoundedInChoices) {
  auto batch = [](int prompts, int n) {
    std::string body = R"({"n":)" + std::to_string(n) + R"(,"prompt":[)";
    for (int i = 0; i < prompts; ++i) body += std::string(i ? "," : "") + "\"p\"";
    return body + "]}";
  };
  ParsedRequest req;
  ApiError err;
  EXPECT_TRUE(parse_request(Endpoint::kCompletions, batch(kMaxChoices, 1), kVocab, &req, &err));
  EXPECT_TRUE(parse_request(Endpoint::kCompletions, batch(kMaxChoices / 2, 2), kVocab, &req, &err));
  EXPECT_EQ(parse_error(Endpoint::kCompletions, batch(kMaxChoices + 1, 1)).param, "prompt");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, batch(kMaxChoices / 2 + 1, 2)).param, "prompt");
}

TEST(Protocol, EchoIsRecordedAndRefusedWithLogprobs) {
  ParsedRequest req;
  ApiError err;
  ASSERT_TRUE(
      parse_request(Endpoint::kCompletions, R"({"prompt":"a","echo":true})", kVocab, &req, &err));
  EXPECT_TRUE(req.echo);
  ASSERT_TRUE(parse_request(Endpoint::kCompletions, R"({"prompt":"a"})", kVocab, &req, &err));
  EXPECT_FALSE(req.echo);
  ApiError e = parse_error(Endpoint::kCompletions, R"({"prompt":"a","echo":true,"logprobs":0})");
  EXPECT_EQ(e.param, "echo");
  EXPECT_EQ(e.http_status, 400);
}

TEST(Protocol, BatchedCompletionResponseNumbersChoicesAndEchoes) {
  const int n = 2;
  std::vector<RequestOutput> outs;
  for (int p = 0; p < 2; ++p) {
    RequestOutput out;
    out.usage.prompt_tokens = 3 + p;
    // Samples in the order they finished, not by index.
    for (int s : {1, 0}) {
      CompletionOutput c;
      c.index = s;
      c.text = "p" + std::to_string(p) + "s" + std::to_string(s);
      c.token_ids.assign(2, 7);
      c.finish_reason = "length";
      out.outputs.push_back(c);
    }
    outs.push_back(out);
  }
  const std::vector<std::string> echo = {"héllo ", "wörld "};
  json r = completion_response("cmpl-x", 1, "m", outs, n, echo);
  ASSERT_EQ(r["choices"].size(), 4u);
  for (int p = 0; p < 2; ++p)
    for (int s = 0; s < n; ++s) {
      const json& c = r["choices"][p * n + s];
      EXPECT_EQ(c["index"], p * n + s);
      EXPECT_EQ(c["text"], echo[p] + "p" + std::to_string(p) + "s" + std::to_string(s));
    }
  EXPECT_EQ(r["usage"]["prompt_tokens"], 3 + 4);
  EXPECT_EQ(r["usage"]["completion_tokens"], 4 * 2);
  EXPECT_EQ(r["usage"]["total_tokens"], 7 + 8);
  // Without echo the text is the completion alone.
  json plain = completion_response("cmpl-x", 1, "m", outs, n);
  EXPECT_EQ(plain["choices"][3]["text"], "p1s1");
}

TEST(Protocol, EchoedLogprobsOffsetsStartAfterThePrompt) {
  RequestOutput out = make_output("ab", 2);
  out.outputs[0].logprobs = {{1, -1, {}}, {2, -1, {}}};
  TokenText text = [](int32_t id) { return id == 1 ? std::string("a") : std::string("b"); };
  const std::vector<std::string> echo = {"日本 "};
  json r = completion_response("cmpl-x", 1, "m", std::span(&out, 1), 1, echo, text);
  EXPECT_EQ(r["choices"][0]["text"], "日本 ab");
  EXPECT_EQ(r["choices"][0]["logprobs"]["text_offset"], json::array({3, 4}));
}

// --- tool_choice: parsing switch, forced calls as a grammar (issue 14) ---

const std::string kToolMessages = R"("messages":[{"role":"user","content":"Set the mode."}])";
// Finite call languages (an enum and a boolean; no parameters), so that a forced call on the
// random tiny model always ends within max_tokens.
const std::string kBoundedTools = R"("tools":[{"type":"function","function":{"name":"set_mode",
    "parameters":{"type":"object","properties":{"mode":{"type":"string","enum":["fast","slow"]},
    "on":{"type":"boolean"}},"required":["mode","on"]}}},
    {"type":"function","function":{"name":"reset","parameters":{"type":"object",
    "properties":{}}}}])";

ParsedRequest parse_ok(const std::string& body) {
  ParsedRequest req;
  ApiError err;
  EXPECT_TRUE(parse_request(Endpoint::kChatCompletions, body, kVocab, &req, &err))
      << err.message << "\n"
      << body;
  return req;
}

TEST(Protocol, ToolCallsAreParsedOnlyWhenToolsAreOfferedAndNotRefused) {
  EXPECT_FALSE(parse_ok("{" + kToolMessages + "}").parse_tool_calls);
  EXPECT_TRUE(parse_ok("{" + kToolMessages + "," + kBoundedTools + "}").parse_tool_calls);
  EXPECT_TRUE(parse_ok("{" + kToolMessages + "," + kBoundedTools + R"(,"tool_choice":"auto"})")
                  .parse_tool_calls);
  EXPECT_FALSE(parse_ok("{" + kToolMessages + "," + kBoundedTools + R"(,"tool_choice":"none"})")
                   .parse_tool_calls);
  EXPECT_FALSE(parse_ok("{" + kToolMessages + R"(,"tools":[]})").parse_tool_calls);
  ParsedRequest cmpl;
  ApiError err;
  ASSERT_TRUE(parse_request(Endpoint::kCompletions, R"({"prompt":"x"})", kVocab, &cmpl, &err));
  EXPECT_FALSE(cmpl.parse_tool_calls);
}

TEST(Protocol, ToolChoiceNoneKeepsMarkupAsContent) {
  const std::string markup =
      "Hi\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"reset\">\n\n</｜DSML｜ invoke>\n</｜DSML｜ "
      "calls>";
  json off = chat_response("c", 1, "m", make_output(markup, 5), false, 0, {}, false);
  EXPECT_EQ(off["choices"][0]["message"]["content"], markup);
  EXPECT_FALSE(off["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(off["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(parse_chat_output(markup, false, false).content, markup);
  // With tools the same text is a call.
  json on = chat_response("c", 1, "m", make_output(markup, 5), false, 0, {}, true);
  EXPECT_EQ(on["choices"][0]["message"]["content"], "Hi");
  ASSERT_EQ(on["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(on["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "reset");
  EXPECT_EQ(on["choices"][0]["finish_reason"], "tool_calls");
}

TEST(Protocol, ForcedToolChoiceBecomesAnEbnfGrammarWithoutThinking) {
  for (const std::string choice :
       {R"("required")", R"({"type":"function","function":{"name":"reset"}})"}) {
    ParsedRequest req =
        parse_ok("{" + kToolMessages + "," + kBoundedTools + R"(,"tool_choice":)" + choice + "}");
    ASSERT_TRUE(req.gen.params.so_args.has_value()) << choice;
    EXPECT_EQ(req.gen.params.so_args->kind, sample::StructuredOutput::Kind::kEbnf);
    EXPECT_NE(req.gen.params.so_args->spec.find("reset"), std::string::npos);
    // Named: only that function can be called.
    EXPECT_EQ(req.gen.params.so_args->spec.find("set_mode") != std::string::npos,
              choice == R"("required")");
    EXPECT_TRUE(req.parse_tool_calls);
    EXPECT_FALSE(req.thinking);
    EXPECT_EQ((*req.gen.chat)["chat_template_kwargs"]["thinking"], false);
    EXPECT_FALSE(req.response_format);
  }
  // Thinking switched off explicitly is fine.
  EXPECT_TRUE(parse_ok("{" + kToolMessages + "," + kBoundedTools +
                       R"(,"tool_choice":"required","thinking":{"type":"disabled"}})")
                  .gen.params.so_args.has_value());
}

TEST(Protocol, ForcedToolChoiceErrorsNameTheField) {
  const std::string head = "{" + kToolMessages + "," + kBoundedTools;
  auto param_of_error = [](const std::string& body) {
    return parse_error(Endpoint::kChatCompletions, body).param;
  };
  EXPECT_EQ(param_of_error(head + R"(,"tool_choice":{"type":"function","function":{"name":"x"}}})"),
            "tool_choice");
  ApiError unknown = parse_error(Endpoint::kChatCompletions,
                                 head + R"(,"tool_choice":{"type":"function","function":
                                           {"name":"x"}}})");
  EXPECT_EQ(unknown.http_status, 400);
  EXPECT_NE(unknown.message.find("'x'"), std::string::npos) << unknown.message;
  EXPECT_EQ(param_of_error("{" + kToolMessages + R"(,"tool_choice":"required"})"), "tool_choice");
  EXPECT_EQ(param_of_error(
                head + R"(,"tool_choice":"required","response_format":{"type":"json_object"}})"),
            "tool_choice");
  EXPECT_EQ(param_of_error(head + R"(,"tool_choice":"required","so_args":{"regex":"a"}})"),
            "tool_choice");
  EXPECT_EQ(param_of_error(head + R"(,"tool_choice":"required","thinking":{"type":"enabled"}})"),
            "tool_choice");
  EXPECT_EQ(param_of_error(head + R"(,"tool_choice":"required",
                                     "chat_template_kwargs":{"thinking":true}})"),
            "tool_choice");
  EXPECT_EQ(param_of_error(head + R"(,"tool_choice":"required","parallel_tool_calls":1})"),
            "parallel_tool_calls");
  EXPECT_EQ(param_of_error("{" + kToolMessages + R"(,"tools":[{"type":"function","function":{}}],
                                                   "tool_choice":"required"})"),
            "tools");
  // "auto" needs no tools and ignores response_format.
  EXPECT_TRUE(parse_ok("{" + kToolMessages +
                       R"(,"tool_choice":"auto","response_format":{"type":"json_object"}})")
                  .gen.params.so_args.has_value());
}

// Through the engine on the random tiny model: whatever it samples under the forced grammar is
// one call of an offered tool with valid arguments.
std::string tiny_model_dir() {
  static const std::string dir = [] {
    std::string d = ::testing::TempDir() + "/protocol_tool_model_" + std::to_string(::getpid());
    std::atexit([] {
      std::filesystem::remove_all(::testing::TempDir() + "/protocol_tool_model_" +
                                  std::to_string(::getpid()));
    });
    v4::TinyModelOptions o;
    o.seed = 5;
    o.tokenizer_dir = std::string(DEEPINFER_SOURCE_DIR) + "/assets/tokenizers/deepseek_v3";
    Status st = v4::write_tiny_model(d, o);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return d;
  }();
  return dir;
}

TEST(Protocol, ForcedToolChoiceOnTheTinyModelGivesAValidCall) {
  EngineArgs args;
  args.model = tiny_model_dir();
  auto engine = Engine::create(args);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  int checked = 0;
  for (const std::string choice :
       {R"("required")", R"({"type":"function","function":{"name":"set_mode"}})"}) {
    for (const std::string sampling :
         {R"("temperature":0)", R"("temperature":1,"seed":1)", R"("temperature":1,"seed":2)"}) {
      ParsedRequest req = parse_ok("{" + kToolMessages + "," + kBoundedTools +
                                   R"(,"parallel_tool_calls":false,"max_tokens":400,)" + sampling +
                                   R"(,"tool_choice":)" + choice + "}");
      auto out = (*engine)->generate(req.gen);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      json r = chat_response("c", 1, "m", *out, req.thinking, 0, {}, req.parse_tool_calls);
      const json& choice0 = r["choices"][0];
      const std::string text = out->outputs[0].text;
      EXPECT_EQ(choice0["finish_reason"], "tool_calls") << text;
      EXPECT_EQ(choice0["message"]["content"], "") << text;
      ASSERT_EQ(choice0["message"]["tool_calls"].size(), 1u) << text;
      const json& fn = choice0["message"]["tool_calls"][0]["function"];
      const json call_args = json::parse(fn["arguments"].get<std::string>(), nullptr, false);
      ASSERT_TRUE(call_args.is_object()) << fn.dump();
      if (choice != R"("required")") EXPECT_EQ(fn["name"], "set_mode");
      if (fn["name"] == "set_mode") {
        ASSERT_EQ(call_args.size(), 2u) << fn.dump();
        EXPECT_TRUE(call_args["mode"] == "fast" || call_args["mode"] == "slow") << fn.dump();
        EXPECT_TRUE(call_args["on"].is_boolean()) << fn.dump();
      } else {
        EXPECT_EQ(fn["name"], "reset");
        EXPECT_TRUE(call_args.empty()) << fn.dump();
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6);
}

}  // namespace
}  // namespace deepinfer::server

#include "deepinfer/server/protocol.h"

#include <gtest/gtest.h>

#include <limits>

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
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions, head + R"(,"tool_choice":"required"})").param,
            "tool_choice");
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions,
                        head + R"(,"tool_choice":{"type":"function","function":{"name":"f"}}})")
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

}  // namespace
}  // namespace deepinfer::server

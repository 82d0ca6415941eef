#include <gtest/gtest.h>

#include <string>

#include "deepinfer/engine/engine_setup.h"
#include "deepinfer/server/protocol.h"
#include "deepinfer/server/protocol_test_util.h"

namespace deepinfer::server {
namespace {

using nlohmann::json;

TEST(Protocol, CompletionRequestMapsFields) {
  ParsedRequest req;
  ApiError err;
  ASSERT_TRUE(parse_request(Endpoint::kCompletions,
                            R"({"model":"m","prompt":"hi","max_tokens":7,"temperature":0,
                                "stream":true,"stream_options":{"include_usage":true},
                                "stop":"x","seed":3,"seq_seed":42,
                                "some_unknown_field":{"a":1}})",
                            kVocab, recipe::Variant::kV41, &req, &err))
      << err.message;
  EXPECT_EQ(req.model, "m");
  EXPECT_EQ(req.gen.prompt, "hi");
  EXPECT_EQ(req.gen.params.max_tokens, 7);
  EXPECT_EQ(req.gen.params.temperature, 0.0f);
  EXPECT_TRUE(req.stream);
  EXPECT_TRUE(req.include_usage);
  ASSERT_EQ(req.gen.params.stop.size(), 1u);
  EXPECT_EQ(req.gen.params.seed, 3u);
  EXPECT_EQ(req.gen.params.seq_seed, 42u);  // DeepSeek's deterministic-sampling seed
}

TEST(Protocol, PromptIdsAndMaxCompletionTokens) {
  ParsedRequest req;
  ApiError err;
  ASSERT_TRUE(parse_request(Endpoint::kCompletions,
                            R"({"prompt":[1,2,3],"max_tokens":3,"max_completion_tokens":5})",
                            kVocab, recipe::Variant::kV41, &req, &err));
  EXPECT_EQ(req.gen.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(req.gen.params.max_tokens, 5);
}

TEST(Protocol, ChatRequestKeepsBody) {
  ParsedRequest req;
  ApiError err;
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions,
                            R"({"messages":[{"role":"user","content":"hello"}]})", kVocab,
                            recipe::Variant::kV41, &req, &err))
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
  EXPECT_TRUE(parse_request(Endpoint::kCompletions, "{\"prompt\":\"é日😀\"}", kVocab,
                            recipe::Variant::kV41, &req, &err))
      << err.message;
}

TEST(Protocol, LogprobsPerEndpoint) {
  ParsedRequest req;
  ApiError err;
  const std::string msgs = R"("messages":[{"role":"user","content":"x"}])";
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions,
                            "{" + msgs + R"(,"logprobs":true,"top_logprobs":3})", kVocab,
                            recipe::Variant::kV41, &req, &err))
      << err.message;
  EXPECT_EQ(req.gen.params.logprobs, 3);
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions, "{" + msgs + R"(,"logprobs":false})",
                            kVocab, recipe::Variant::kV41, &req, &err));
  EXPECT_FALSE(req.gen.params.logprobs.has_value());
  ASSERT_TRUE(parse_request(Endpoint::kCompletions, R"({"prompt":"x","logprobs":2})", kVocab,
                            recipe::Variant::kV41, &req, &err));
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
                            recipe::Variant::kV41, &req, &err))
      << err.message;
  EXPECT_EQ(req.gen.params.n, 3);
  // json_object / json_schema become so_args, and chat thinking is switched off for them.
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions,
                            "{" + msgs + R"(,"response_format":{"type":"json_object"}})", kVocab,
                            recipe::Variant::kV41, &req, &err))
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
                            kVocab, recipe::Variant::kV41, &req, &err))
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
                            head + R"(,"thinking":{"type":"disabled"}})", kVocab,
                            recipe::Variant::kV41, &req, &err))
      << err.message;
  EXPECT_FALSE(req.thinking);
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions, head + R"(,"thinking":{"type":"enabled"}})",
                            kVocab, recipe::Variant::kV41, &req, &err))
      << err.message;
  EXPECT_TRUE(req.thinking);
  EXPECT_EQ(
      parse_error(Endpoint::kChatCompletions, head + R"(,"thinking":{"type":"maybe"}})").param,
      "thinking");
  // Thinking switched off explicitly goes with structured output; switched on it is a 400.
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions, head + R"(,"thinking":{"type":"disabled"},
                                      "response_format":{"type":"json_object"}})",
                            kVocab, recipe::Variant::kV41, &req, &err))
      << err.message;
  EXPECT_FALSE(req.thinking);
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions, head + R"(,"thinking":{"type":"enabled"},
                                  "response_format":{"type":"json_object"}})")
                .param,
            "response_format");
}

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
                            recipe::Variant::kV41, &req, &err))
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
  ASSERT_TRUE(
      parse_request(Endpoint::kCompletions, body, kVocab, recipe::Variant::kV41, &req, &err))
      << err.message;
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
      {"seq_seed", "\"x\""},
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
  // The pool check's error (a sequence the KV pool can never hold), from the engine itself.
  ApiError pool = error_from_status(check_pool_room(12, 100, 64));
  EXPECT_EQ(pool.http_status, 400);
  EXPECT_EQ(pool.param, "max_tokens");
  EXPECT_EQ(pool.code, "context_length_exceeded");
  EXPECT_NE(pool.message.find("raise --kv-memory"), std::string::npos) << pool.message;
  EXPECT_TRUE(check_pool_room(12, 53, 64).ok());  // 64 tokens of state: fits exactly
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
                            R"({"messages":[{"role":"user","content":""}]})", kVocab,
                            recipe::Variant::kV41, &req, &err))
      << err.message;
}

TEST(Protocol, BatchedPrompts) {
  ParsedRequest req;
  ApiError err;
  ASSERT_TRUE(parse_request(Endpoint::kCompletions, R"({"prompt":["a","bc","d"],"n":2})", kVocab,
                            recipe::Variant::kV41, &req, &err))
      << err.message;
  ASSERT_EQ(req.prompts.size(), 3u);
  EXPECT_EQ(req.prompts[1].text, "bc");
  EXPECT_FALSE(req.prompts[1].is_ids);
  EXPECT_EQ(req.gen.prompt, "a");  // the first prompt, for single-prompt callers
  GenerateRequest g = request_for_prompt(req, 2);
  EXPECT_EQ(g.prompt, "d");
  EXPECT_EQ(g.params.n, 2);

  ASSERT_TRUE(parse_request(Endpoint::kCompletions, R"({"prompt":[[1,2],[3]]})", kVocab,
                            recipe::Variant::kV41, &req, &err))
      << err.message;
  ASSERT_EQ(req.prompts.size(), 2u);
  EXPECT_TRUE(req.prompts[1].is_ids);
  EXPECT_EQ(req.prompts[1].ids, std::vector<int32_t>{3});
  g = request_for_prompt(req, 1);
  EXPECT_FALSE(g.prompt.has_value());
  EXPECT_EQ(g.prompt_ids, std::vector<int32_t>{3});

  // A flat list of ids stays one prompt.
  ASSERT_TRUE(parse_request(Endpoint::kCompletions, R"({"prompt":[4,5,6]})", kVocab,
                            recipe::Variant::kV41, &req, &err));
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
  EXPECT_TRUE(parse_request(Endpoint::kCompletions, batch(kMaxChoices, 1), kVocab,
                            recipe::Variant::kV41, &req, &err));
  EXPECT_TRUE(parse_request(Endpoint::kCompletions, batch(kMaxChoices / 2, 2), kVocab,
                            recipe::Variant::kV41, &req, &err));
  EXPECT_EQ(parse_error(Endpoint::kCompletions, batch(kMaxChoices + 1, 1)).param, "prompt");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, batch(kMaxChoices / 2 + 1, 2)).param, "prompt");
}

TEST(Protocol, EchoIsRecordedAndRefusedWithLogprobs) {
  ParsedRequest req;
  ApiError err;
  ASSERT_TRUE(parse_request(Endpoint::kCompletions, R"({"prompt":"a","echo":true})", kVocab,
                            recipe::Variant::kV41, &req, &err));
  EXPECT_TRUE(req.echo);
  ASSERT_TRUE(parse_request(Endpoint::kCompletions, R"({"prompt":"a"})", kVocab,
                            recipe::Variant::kV41, &req, &err));
  EXPECT_FALSE(req.echo);
  ApiError e = parse_error(Endpoint::kCompletions, R"({"prompt":"a","echo":true,"logprobs":0})");
  EXPECT_EQ(e.param, "echo");
  EXPECT_EQ(e.http_status, 400);
}

}  // namespace
}  // namespace deepinfer::server

#include <gtest/gtest.h>

#include <cctype>
#include <limits>
#include <set>
#include <string>

#include "deepinfer/server/protocol.h"
#include "deepinfer/server/protocol_test_util.h"
#include "deepinfer/server/random_id.h"

namespace deepinfer::server {
namespace {

using nlohmann::json;

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
  u.accepted_prediction_tokens = 3;
  json j = usage_json(u, 5, 2);
  EXPECT_EQ(j["total_tokens"], 15);
  EXPECT_EQ(j["prompt_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(j["completion_tokens_details"]["reasoning_tokens"], 2);
  EXPECT_EQ(j["completion_tokens_details"]["accepted_prediction_tokens"], 3);
  EXPECT_EQ(j["prompt_cache_hit_tokens"], 4);
  EXPECT_EQ(j["prompt_cache_miss_tokens"], 6);
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
  json r = chat_response("chatcmpl-1", 100, "m", make_output("think</think>answer", 4), true, 1,
                         recipe::Variant::kV41);
  const json& msg = r["choices"][0]["message"];
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["reasoning_content"], "think");
  EXPECT_EQ(msg["content"], "answer");
  EXPECT_EQ(r["usage"]["completion_tokens_details"]["reasoning_tokens"], 1);
}

TEST(Protocol, ChatResponseWithoutThinkingIsContent) {
  json r = chat_response("chatcmpl-1", 100, "m", make_output("plain text", 2), false, 0,
                         recipe::Variant::kV41);
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

}  // namespace
}  // namespace deepinfer::server

#include "deepinfer/sample/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

namespace deepinfer::sample {
namespace {

constexpr int64_t kVocab = 1000;

// Expects validate() to reject the params with a message containing `fragment`.
void expect_invalid(const std::function<void(SamplingParams&)>& edit, const std::string& fragment) {
  SamplingParams p;
  edit(p);
  Status st = validate(p, kVocab);
  ASSERT_FALSE(st.ok()) << fragment;
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find(fragment), std::string::npos)
      << "message: " << st.message() << "\nwanted: " << fragment;
}

TEST(Validate, DefaultsAreValid) { EXPECT_TRUE(validate(SamplingParams{}, kVocab).ok()); }

TEST(Validate, AcceptsTheEdges) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.top_k = -1;
  p.min_p = 1.0f;
  p.frequency_penalty = -2.0f;
  p.presence_penalty = 2.0f;
  p.logit_bias = {{0, -100.0f}, {999, 100.0f}};
  p.max_tokens = 1;
  p.min_tokens = 1;
  p.stop_token_ids = {0, 999};
  p.logprobs = 20;
  p.top_k = 5000;  // larger than the vocab: means "all"
  EXPECT_TRUE(validate(p, kVocab).ok());
}

TEST(Validate, ErrorsNameTheField) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_invalid([](auto& p) { p.n = 0; }, "n must be at least 1, got 0");
  expect_invalid([](auto& p) { p.temperature = -0.5f; }, "temperature must be");
  expect_invalid([&](auto& p) { p.temperature = nan; }, "temperature must be");
  expect_invalid([](auto& p) { p.temperature = INFINITY; }, "temperature must be");
  expect_invalid([](auto& p) { p.top_p = 1.5f; }, "top_p must be in (0, 1], got 1.5");
  expect_invalid([](auto& p) { p.top_p = 0.0f; }, "top_p must be in (0, 1], got 0");
  expect_invalid([&](auto& p) { p.top_p = nan; }, "top_p must be in (0, 1]");
  expect_invalid([](auto& p) { p.top_k = -2; }, "top_k must be");
  expect_invalid([](auto& p) { p.min_p = -0.1f; }, "min_p must be in [0, 1], got -0.1");
  expect_invalid([](auto& p) { p.min_p = 1.5f; }, "min_p must be in [0, 1]");
  expect_invalid([](auto& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty must be");
  expect_invalid([](auto& p) { p.repetition_penalty = -1.0f; }, "repetition_penalty must be");
  expect_invalid([](auto& p) { p.frequency_penalty = 2.5f; },
                 "frequency_penalty must be in [-2, 2], got 2.5");
  expect_invalid([](auto& p) { p.presence_penalty = -3.0f; },
                 "presence_penalty must be in [-2, 2], got -3");
  expect_invalid([](auto& p) { p.logit_bias = {{1000, 1.0f}}; }, "logit_bias key");
  expect_invalid([](auto& p) { p.logit_bias = {{-1, 1.0f}}; }, "logit_bias key");
  expect_invalid(
      [](auto& p) {
        p.logit_bias = {{5, 101.0f}};
      },
      "logit_bias[5] must be in [-100, 100], got 101");
  expect_invalid([](auto& p) { p.max_tokens = 0; }, "max_tokens must be at least 1");
  expect_invalid([](auto& p) { p.min_tokens = -1; }, "min_tokens must be in [0, max_tokens=16]");
  expect_invalid([](auto& p) { p.min_tokens = 17; }, "min_tokens must be in [0, max_tokens=16]");
  expect_invalid([](auto& p) { p.stop_token_ids = {3, 1000}; }, "stop_token_ids[1]");
  expect_invalid([](auto& p) { p.stop_token_ids = {-4}; }, "stop_token_ids[0]");
  expect_invalid([](auto& p) { p.stop = {"ok", ""}; }, "stop[1] must be a non-empty string");
  expect_invalid([](auto& p) { p.logprobs = -1; }, "logprobs must be in [0, 20], got -1");
  expect_invalid([](auto& p) { p.logprobs = 21; }, "logprobs must be in [0, 20], got 21");
}

TEST(Validate, VocabSize) {
  Status st = validate(SamplingParams{}, 0);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("vocab_size"), std::string::npos);
  SamplingParams p;
  p.logprobs = 5;
  st = validate(p, 4);  // more logprobs than tokens
  EXPECT_NE(st.message().find("logprobs must be in [0, 4]"), std::string::npos);
}

TEST(FromJson, ReadsEveryField) {
  const auto j = nlohmann::json::parse(R"({
    "n": 2, "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
    "repetition_penalty": 1.1, "frequency_penalty": 0.5, "presence_penalty": -0.5,
    "logit_bias": {"17": -100, "3": 2.5}, "seed": 1234, "max_tokens": 64, "min_tokens": 4,
    "stop_token_ids": [1, 2], "stop": ["\n\n", "END"], "include_stop_str_in_output": true,
    "ignore_eos": true, "logprobs": 5, "skip_special_tokens": false, "unknown_key": [1, 2, 3]
  })");
  auto p = sampling_params_from_json(j);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->n, 2);
  EXPECT_FLOAT_EQ(p->temperature, 0.7f);
  EXPECT_FLOAT_EQ(p->top_p, 0.9f);
  EXPECT_EQ(p->top_k, 40);
  EXPECT_FLOAT_EQ(p->min_p, 0.05f);
  EXPECT_FLOAT_EQ(p->repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(p->frequency_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p->presence_penalty, -0.5f);
  EXPECT_EQ(p->logit_bias, (std::map<int32_t, float>{{3, 2.5f}, {17, -100.0f}}));
  EXPECT_EQ(p->seed, 1234u);
  EXPECT_EQ(p->max_tokens, 64);
  EXPECT_EQ(p->min_tokens, 4);
  EXPECT_EQ(p->stop_token_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(p->stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_TRUE(p->include_stop_str_in_output);
  EXPECT_TRUE(p->ignore_eos);
  EXPECT_EQ(p->logprobs, 5);
  EXPECT_FALSE(p->skip_special_tokens);
}

TEST(FromJson, EmptyObjectAndNullsGiveDefaults) {
  auto p = sampling_params_from_json(nlohmann::json::object());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->max_tokens, 16);
  EXPECT_FALSE(p->seed.has_value());
  auto q = sampling_params_from_json(
      nlohmann::json::parse(R"({"seed": null, "logprobs": null, "temperature": null})"));
  ASSERT_TRUE(q.ok());
  EXPECT_FALSE(q->seed.has_value());
  EXPECT_FALSE(q->logprobs.has_value());
  EXPECT_EQ(q->temperature, 1.0f);
}

TEST(FromJson, StopMayBeOneString) {
  auto p = sampling_params_from_json(nlohmann::json::parse(R"({"stop": "###"})"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->stop, (std::vector<std::string>{"###"}));
}

TEST(FromJson, IntegralFloatsAndNegativeSeeds) {
  auto p = sampling_params_from_json(nlohmann::json::parse(
      R"({"max_tokens": 32.0, "seed": -1, "seq_seed": 18446744073709551615})"));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->max_tokens, 32);
  EXPECT_EQ(p->seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(p->seq_seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(p->temperature, 1.0f);
}

TEST(FromJson, WrongTypesNameTheField) {
  auto expect_error = [](const char* text, const std::string& fragment) {
    auto p = sampling_params_from_json(nlohmann::json::parse(text));
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(fragment), std::string::npos)
        << p.status().message() << " / " << fragment;
  };
  expect_error(R"({"temperature": "hot"})", "temperature must be a number, got string");
  expect_error(R"({"top_p": true})", "top_p must be a number, got boolean");
  expect_error(R"({"top_k": 2.5})", "top_k must be an integer");
  expect_error(R"({"n": "2"})", "n must be an integer, got string");
  expect_error(R"({"max_tokens": 1e20})", "max_tokens must be an integer");
  expect_error(R"({"max_tokens": 3000000000})", "max_tokens is out of range");
  expect_error(R"({"ignore_eos": 1})", "ignore_eos must be a boolean, got number");
  expect_error(R"({"stop": 5})", "stop must be a string or an array of strings");
  expect_error(R"({"stop": ["a", 3]})", "stop[1] must be a string");
  expect_error(R"({"stop_token_ids": 3})", "stop_token_ids must be an array");
  expect_error(R"({"stop_token_ids": [1, "x"]})", "stop_token_ids[1] must be an integer");
  expect_error(R"({"logit_bias": [1, 2]})", "logit_bias must be an object");
  expect_error(R"({"logit_bias": {"abc": 1}})", "logit_bias key \"abc\"");
  expect_error(R"({"logit_bias": {"12": "x"}})", "logit_bias[12] must be a number");
  expect_error(R"({"seed": "x"})", "seed must be an integer");
  expect_error(R"({"seq_seed": 1.5})", "seq_seed must be an integer");
  expect_error(R"({"logprobs": true})", "logprobs must be an integer, got boolean");
  expect_error(R"([1, 2])", "sampling params must be a JSON object");
  expect_error(R"({"so_args": "x"})", "so_args must be an object");
  expect_error(R"({"so_args": {}})", "so_args must have exactly one of");
  expect_error(R"({"so_args": {"regex": "a", "ebnf": "root ::= \"a\""}})",
               "so_args must have exactly one of");
  expect_error(R"({"so_args": {"regex": 3}})", "so_args.regex must be a string");
  expect_error(R"({"so_args": {"json_object": false}})", "so_args.json_object must be true");
  expect_error(R"({"so_args": {"json_schema": 3}})", "so_args.json_schema must be a schema");
  expect_error(R"({"so_args": {"grammar": "x"}})", "so_args has unknown key 'grammar'");
}

TEST(FromJson, StructuredOutput) {
  using Kind = StructuredOutput::Kind;
  auto read = [](const char* text) {
    auto p = sampling_params_from_json(nlohmann::json::parse(text));
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    return p.ok() ? p->so_args : std::nullopt;
  };
  EXPECT_FALSE(read(R"({"so_args": null})").has_value());
  EXPECT_EQ(read(R"({"so_args": {"regex": "[0-9]+"}})"),
            (StructuredOutput{Kind::kRegex, "[0-9]+"}));
  EXPECT_EQ(read(R"({"so_args": {"ebnf": "root ::= \"x\""}})"),
            (StructuredOutput{Kind::kEbnf, "root ::= \"x\""}));
  EXPECT_EQ(read(R"({"so_args": {"json_object": true}})"),
            (StructuredOutput{Kind::kJsonObject, ""}));
  EXPECT_EQ(read(R"({"so_args": {"json_schema": {"type": "integer"}}})"),
            (StructuredOutput{Kind::kJsonSchema, R"({"type":"integer"})"}));
  EXPECT_EQ(read(R"({"so_args": {"json_schema": "{\"type\": \"string\"}"}})"),
            (StructuredOutput{Kind::kJsonSchema, R"({"type": "string"})"}));
  EXPECT_STREQ(kind_name(Kind::kJsonSchema), "json_schema");
}

}  // namespace
}  // namespace deepinfer::sample

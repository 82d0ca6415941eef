// Request validation, JSON formatting and streaming behaviour not pinned by the vectors.
#include <gtest/gtest.h>

#include "deepinfer/recipe/chat_encoder.h"
#include "deepinfer/recipe/completion_parser.h"
#include "deepinfer/recipe/python_json.h"
#include "deepinfer/recipe/streaming_parser.h"

namespace deepinfer::recipe {
namespace {

std::string error_of(const std::string& request_json) {
  auto r = encode_chat_request_text(request_json);
  return r.ok() ? std::string("<ok>") : r.status().message();
}

TEST(ChatRequest, InvalidRequestsNameTheField) {
  EXPECT_NE(error_of("{").find("request"), std::string::npos);
  EXPECT_NE(error_of("{}").find("messages"), std::string::npos);
  EXPECT_NE(error_of(R"({"messages": []})").find("messages"), std::string::npos);
  EXPECT_NE(
      error_of(R"({"messages": [{"role": "robot", "content": "x"}]})").find("messages[0].role"),
      std::string::npos);
  EXPECT_NE(
      error_of(R"({"messages": [{"role": "user", "content": 5}]})").find("messages[0].content"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"messages": [{"role": "user", "content": "x"}],
                         "reasoning_effort": "medium"})")
                .find("reasoning_effort"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"messages": [{"role": "user", "content": "x"}],
                         "reasoning_effort": true})")
                .find("reasoning_effort"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"messages": [{"role": "user", "content": "x"}],
                         "reasoning_effort": 101})")
                .find("reasoning_effort"),
            std::string::npos);
  EXPECT_NE(
      error_of(R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})").find("tools"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"messages": [{"role": "user", "content": "x"}],
                         "tools": [{"type": "function", "function": {}}]})")
                .find("tools[0].function.name"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"messages": [{"role": "user", "content": "x"}],
                         "continue_final_message": true})")
                .find("continue_final_message"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"messages": [{"role": "assistant", "content": "x",
                         "tool_calls": [{"function": {"name": 3}}]}]})")
                .find("messages[0].tool_calls[0].function.name"),
            std::string::npos);
  EXPECT_NE(
      error_of(R"({"messages": [{"role": "user", "content": "x", "task": "dance"}]})").find("task"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"messages": [{"role": "developer", "content": ""}]})")
                .find("messages[0].content"),
            std::string::npos);
}

TEST(PythonJson, MatchesJsonDumpsFormatting) {
  EXPECT_EQ(python_float_repr(3.0), "3.0");
  EXPECT_EQ(python_float_repr(1.5e-7), "1.5e-07");
  EXPECT_EQ(python_float_repr(1e21), "1e+21");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(123456789.5), "123456789.5");
  EXPECT_EQ(python_float_repr(-0.5), "-0.5");
  EXPECT_EQ(python_json_dumps(Json::parse(R"({"a": [1, 2.5, null, true], "b": "é\n\u0007"})")),
            "{\"a\": [1, 2.5, null, true], \"b\": \"é\\n\\u0007\"}");
}

TEST(StrictParser, RejectsMarkersInContentAndMissingThinkClose) {
  EXPECT_FALSE(parse_completion("a<think>b<｜end▁of▁sentence｜>", false).ok());
  EXPECT_FALSE(parse_completion("no close<｜end▁of▁sentence｜>", true).ok());
  EXPECT_FALSE(parse_completion("x<｜end▁of▁sentence｜>trailing", false).ok());
}

TEST(StreamingParser, HoldsBackPartialTagsAndEndsOpenReasoning) {
  StreamingParser p(true);
  StreamDelta d;
  p.feed("thinking <", &d);
  EXPECT_EQ(d.reasoning, "thinking ");  // "<" might start </think>
  StreamDelta d2;
  p.feed("/thi", &d2);
  EXPECT_EQ(d2.reasoning, "");
  StreamDelta d3;
  p.feed("nk>Hi", &d3);
  EXPECT_EQ(d3.content, "Hi");
  StreamDelta d4;
  p.finish(&d4);
  EXPECT_EQ(p.message().reasoning_content, "thinking ");
  EXPECT_EQ(p.message().content, "Hi");

  StreamingParser open(true);
  StreamDelta e;
  open.feed("all reasoning", &e);
  open.finish(&e);
  EXPECT_EQ(open.message().reasoning_content, "all reasoning");
  EXPECT_EQ(open.message().content, "");
}

TEST(StreamingParser, ToolCallNameComesFirstThenArgumentFragments) {
  StreamingParser p(false);
  std::string text =
      "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"s\" "
      "string=\"true\">a\"b</｜DSML｜ parameter>\n<｜DSML｜ parameter name=\"n\" "
      "string=\"false\">12</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  std::vector<ToolCallDelta> all;
  for (char c : text) {
    StreamDelta d;
    p.feed(std::string(1, c), &d);
    EXPECT_EQ(d.content, "");
    for (auto& t : d.tool_calls) all.push_back(t);
  }
  StreamDelta d;
  p.finish(&d);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all[0].name, "f");
  EXPECT_EQ(all[0].arguments, "");
  std::string args;
  for (auto& t : all) args += t.arguments;
  EXPECT_EQ(args, "{\"s\": \"a\\\"b\", \"n\": 12}");
  EXPECT_GT(all.size(), 3u) << "arguments stream in fragments";
  // An unterminated call at end of stream is closed and emitted.
  StreamingParser q(false);
  StreamDelta e;
  q.feed(
      "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"g\">\n<｜DSML｜ parameter name=\"k\" "
      "string=\"true\">v",
      &e);
  q.finish(&e);
  ASSERT_EQ(q.message().tool_calls.size(), 1u);
  EXPECT_EQ(q.message().tool_calls[0].arguments, "{\"k\": \"v\"}");
}

}  // namespace
}  // namespace deepinfer::recipe

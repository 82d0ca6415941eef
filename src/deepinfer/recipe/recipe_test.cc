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

// The audit's three completions the streaming parser used to accept: at the end of the stream
// it now flags exactly what the strict parser rejects, whatever the chunking, while its message
// stays the lenient reading. Text that ends before EOS (the engine drops EOS text) is checked as
// if EOS followed.
TEST(StreamingParser, FlagsWhatTheStrictParserRejectsAtTheEndOfTheStream) {
  const std::string eos = kEos;
  const DsmlTags& t = DsmlTags::of(Variant::kV41);
  const std::string calls = "\n\n" + t.calls_open + "\n" + t.invoke_open + " name=\"f\">\n" +
                            t.param_open + " name=\"a\" string=\"true\">x" + t.param_close + "\n" +
                            t.invoke_close + "\n" + t.calls_close;
  struct Case {
    std::string text;
    bool thinking;
  };
  const std::vector<Case> bad = {
      {"reasoning that never ends" + eos, true},
      {"ok" + calls + "text after the calls" + eos, false},
      {"text before<think>r</think>c" + eos, false},
      {"r</think>text before<think>again" + eos, true},
  };
  const std::vector<Case> good = {{"r</think>answer" + eos, true}, {"ok" + calls + eos, false}};
  for (bool eos_in_text : {true, false}) {
    for (const Case& c : bad) {
      const std::string text = eos_in_text ? c.text : c.text.substr(0, c.text.size() - eos.size());
      auto strict = parse_completion(c.text, c.thinking);
      ASSERT_FALSE(strict.ok()) << c.text;
      for (size_t chunk : {size_t{1}, size_t{3}, text.size()}) {
        StreamingParser p(c.thinking);
        StreamDelta d;
        for (size_t i = 0; i < text.size(); i += chunk) p.feed(text.substr(i, chunk), &d);
        p.finish(&d, eos_in_text);
        EXPECT_EQ(p.malformed().message(), strict.status().message())
            << text << " in chunks of " << chunk;
      }
    }
    for (const Case& c : good) {
      const std::string text = eos_in_text ? c.text : c.text.substr(0, c.text.size() - eos.size());
      StreamingParser p(c.thinking);
      StreamDelta d;
      p.feed(text, &d);
      p.finish(&d, eos_in_text);
      EXPECT_TRUE(p.malformed().ok()) << text << ": " << p.malformed().to_string();
      EXPECT_EQ(p.message(), *parse_completion(c.text, c.thinking));
    }
  }
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

// A completion with a DSML calls block (as the encoder writes one), in chat or thinking mode.
std::string completion_with_markup(bool thinking) {
  Json messages = Json::parse(R"([{"role": "assistant", "reasoning_content": "plan <b>",
      "content": "Calling.", "tool_calls": [{"type": "function", "function": {"name": "f",
      "arguments": {"s": "a\"b", "n": 12}}}]}])");
  EncodeOptions o;
  o.add_bos = false;
  o.thinking = thinking;
  o.drop_thinking = false;
  auto text = encode_messages(messages, o);
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  return text.ok() ? *text : "";
}

// What the parsers must return with tool calls off: the text between the markers, verbatim.
ParsedMessage markup_as_content(const std::string& completion, bool thinking) {
  ParsedMessage m;
  std::string rest = completion.substr(0, completion.size() - std::string(kEos).size());
  if (thinking) {
    size_t close = rest.find(kThinkClose);
    m.reasoning_content = rest.substr(0, close);
    rest = rest.substr(close + std::string(kThinkClose).size());
  }
  m.content = rest;
  return m;
}

TEST(ToolCallsOff, StrictParserKeepsMarkupAsContent) {
  for (bool thinking : {false, true}) {
    const std::string text = completion_with_markup(thinking);
    ASSERT_NE(text.find("<｜DSML｜ calls>"), std::string::npos);
    auto on = parse_completion(text, thinking);
    ASSERT_TRUE(on.ok()) << on.status().to_string();
    ASSERT_EQ(on->tool_calls.size(), 1u);  // the default still parses calls
    auto off = parse_completion(text, thinking, Variant::kV41, /*parse_tool_calls=*/false);
    ASSERT_TRUE(off.ok()) << off.status().to_string();
    EXPECT_EQ(*off, markup_as_content(text, thinking));
    EXPECT_NE(off->content.find("<｜DSML｜ invoke name=\"f\">"), std::string::npos);
  }
  // Markup inside reasoning stays there too; other markers are still errors.
  const std::string reasoning = "a\n\n<｜DSML｜ calls>\nb";
  auto r = parse_completion(reasoning + "</think>c" + kEos, true, Variant::kV41, false);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->reasoning_content, reasoning);
  EXPECT_EQ(r->content, "c");
  EXPECT_FALSE(parse_completion(std::string("a<think>b") + kEos, false, Variant::kV41, false).ok());
}

TEST(ToolCallsOff, StreamingParserKeepsMarkupAsContentAtEverySplit) {
  for (bool thinking : {false, true}) {
    const std::string text = completion_with_markup(thinking);
    const ParsedMessage want = markup_as_content(text, thinking);
    // Two chunks split at every byte, and byte by byte.
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      StreamingParser p(thinking, Variant::kV41, /*parse_tool_calls=*/false);
      StreamDelta d;
      p.feed(text.substr(0, cut), &d);
      p.feed(text.substr(cut), &d);
      p.finish(&d);
      EXPECT_EQ(p.message(), want) << "cut at " << cut;
      EXPECT_EQ(d.content, want.content) << "cut at " << cut;
      EXPECT_EQ(d.reasoning, want.reasoning_content) << "cut at " << cut;
      EXPECT_TRUE(d.tool_calls.empty());
    }
    StreamingParser p(thinking, Variant::kV41, false);
    std::string content;
    for (char c : text) {
      StreamDelta d;
      p.feed(std::string(1, c), &d);
      content += d.content;
      EXPECT_TRUE(d.tool_calls.empty());
    }
    StreamDelta d;
    p.finish(&d);
    EXPECT_EQ(content + d.content, want.content);
    EXPECT_EQ(p.message(), want);
  }
}

}  // namespace
}  // namespace deepinfer::recipe

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>

#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"
#include "deepinfer/server/protocol.h"
#include "deepinfer/server/protocol_test_util.h"

namespace deepinfer::server {
namespace {

using nlohmann::json;

TEST(Protocol, ToolChoice) {
  const std::string head =
      R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function",
          "function":{"name":"f","parameters":{"type":"object"}}}])";
  ParsedRequest req;
  ApiError err;
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions, head + R"(,"tool_choice":"auto"})", kVocab,
                            recipe::Variant::kV41, &req, &err))
      << err.message;
  EXPECT_TRUE(req.gen.chat->contains("tools"));
  ASSERT_TRUE(parse_request(Endpoint::kChatCompletions, head + R"(,"tool_choice":"none"})", kVocab,
                            recipe::Variant::kV41, &req, &err))
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

// The output parser follows the served model's format: V4's tags are a call for a V4 model,
// and stay text (no call) when read as V4.1 (and the other way round).
TEST(Protocol, ToolCallsAreParsedInTheModelsFormat) {
  const std::string v4 =
      "Ok.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"k\" "
      "string=\"true\">v</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  const std::string v41 =
      "Ok.\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"k\" "
      "string=\"true\">v</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  for (auto [text, variant, calls] :
       {std::tuple{v4, recipe::Variant::kV4, 1u}, std::tuple{v41, recipe::Variant::kV41, 1u},
        std::tuple{v41, recipe::Variant::kV4, 0u}, std::tuple{v4, recipe::Variant::kV41, 0u}}) {
    json r = chat_response("c", 1, "m", make_output(text, 5), false, 0, variant);
    const json& msg = r["choices"][0]["message"];
    EXPECT_EQ(msg.contains("tool_calls") ? msg["tool_calls"].size() : 0u, calls) << r.dump();
    if (calls) {
      EXPECT_EQ(msg["content"], "Ok.");
      EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "f");
      EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
    }
  }
  // A forced call's grammar spells the model's tags.
  const std::string body = R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":
      "function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":
      "required","chat_template_kwargs":{"thinking":false}})";
  ParsedRequest req;
  ApiError err;
  ASSERT_TRUE(
      parse_request(Endpoint::kChatCompletions, body, kVocab, recipe::Variant::kV4, &req, &err))
      << err.message;
  ASSERT_TRUE(req.gen.params.so_args.has_value());
  EXPECT_NE(req.gen.params.so_args->spec.find("tool_calls"), std::string::npos);
  EXPECT_EQ(req.variant, recipe::Variant::kV4);
}

TEST(Protocol, ToolCallIdsAreRandomAndDifferAcrossChoices) {
  const std::string call =
      "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"k\" "
      "string=\"true\">v</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  RequestOutput out = make_output(call, 3);
  CompletionOutput second = out.outputs[0];
  second.index = 1;
  out.outputs.push_back(second);
  json r = chat_response("chatcmpl-x", 1, "m", out, false, 0, recipe::Variant::kV41);
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
  EXPECT_TRUE(
      parse_request(Endpoint::kChatCompletions, body, kVocab, recipe::Variant::kV41, &req, &err))
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
  ASSERT_TRUE(parse_request(Endpoint::kCompletions, R"({"prompt":"x"})", kVocab,
                            recipe::Variant::kV41, &cmpl, &err));
  EXPECT_FALSE(cmpl.parse_tool_calls);
}

TEST(Protocol, ToolChoiceNoneKeepsMarkupAsContent) {
  const std::string markup =
      "Hi\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"reset\">\n\n</｜DSML｜ invoke>\n</｜DSML｜ "
      "calls>";
  json off = chat_response("c", 1, "m", make_output(markup, 5), false, 0, recipe::Variant::kV41, {},
                           false);
  EXPECT_EQ(off["choices"][0]["message"]["content"], markup);
  EXPECT_FALSE(off["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(off["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(parse_chat_output(markup, false, recipe::Variant::kV41, false).content, markup);
  // With tools the same text is a call.
  json on =
      chat_response("c", 1, "m", make_output(markup, 5), false, 0, recipe::Variant::kV41, {}, true);
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
    v4::TinyModelOptions o;
    o.seed = 5;
    return v4::write_tiny_model_for_test("protocol_tool_model", o);
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
      json r = chat_response("c", 1, "m", *out, req.thinking, 0, recipe::Variant::kV41, {},
                             req.parse_tool_calls);
      const json& choice0 = r["choices"][0];
      const std::string text = out->outputs[0].text;
      EXPECT_EQ(choice0["finish_reason"], "tool_calls") << text;
      EXPECT_EQ(choice0["message"]["content"], "") << text;
      ASSERT_EQ(choice0["message"]["tool_calls"].size(), 1u) << text;
      const json& fn = choice0["message"]["tool_calls"][0]["function"];
      const json call_args = json::parse(fn["arguments"].get<std::string>(), nullptr, false);
      ASSERT_TRUE(call_args.is_object()) << fn.dump();
      if (choice != R"("required")") {
        EXPECT_EQ(fn["name"], "set_mode");
      }
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

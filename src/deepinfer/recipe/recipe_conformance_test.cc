// shared/conformance/chat_encoding.jsonl and chat_parsing.jsonl, strict and streaming.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>

#include "deepinfer/recipe/chat_encoder.h"
#include "deepinfer/recipe/completion_parser.h"
#include "deepinfer/recipe/streaming_parser.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer::recipe {
namespace {

const std::string kShared = DEEPINFER_SHARED_DIR;

std::vector<Json> read_lines(const std::string& name) {
  std::ifstream f(kShared + "/conformance/" + name);
  std::vector<Json> out;
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) out.push_back(Json::parse(line));
  return out;
}

TEST(ChatEncodingConformance, EveryVectorGivesThePrompt) {
  auto vs = read_lines("chat_encoding.jsonl");
  ASSERT_GE(vs.size(), 50u);
  int bad = 0;
  for (const Json& v : vs) {
    auto got = encode_chat_request(v["request"]);
    if (!got.ok()) {
      ++bad;
      ADD_FAILURE() << v["id"] << ": " << got.status().to_string();
      continue;
    }
    if (*got != v["prompt"].get<std::string>()) {
      ++bad;
      ADD_FAILURE() << v["id"] << "\n want " << Json(v["prompt"]).dump() << "\n got  "
                    << Json(*got).dump();
    }
  }
  EXPECT_EQ(bad, 0) << "of " << vs.size();
}

void expect_matches(const ParsedMessage& got, const Json& want, const std::string& id) {
  EXPECT_EQ(got.reasoning_content, want["reasoning_content"].get<std::string>()) << id;
  EXPECT_EQ(got.content, want["content"].get<std::string>()) << id;
  ASSERT_EQ(got.tool_calls.size(), want["tool_calls"].size()) << id;
  for (size_t i = 0; i < got.tool_calls.size(); ++i) {
    const Json& f = want["tool_calls"][i]["function"];
    EXPECT_EQ(got.tool_calls[i].name, f["name"].get<std::string>()) << id;
    EXPECT_EQ(got.tool_calls[i].arguments, f["arguments"].get<std::string>()) << id;
    EXPECT_EQ(Json::parse(got.tool_calls[i].arguments), f["arguments_json"]) << id;
  }
}

TEST(ChatParsingConformance, StrictParserGivesExpectedOrError) {
  auto vs = read_lines("chat_parsing.jsonl");
  ASSERT_GE(vs.size(), 20u);
  for (const Json& v : vs) {
    std::string id = v["id"];
    bool thinking = v["thinking_mode"] == "thinking";
    auto got = parse_completion(v["completion_text"].get<std::string>(), thinking);
    if (v.value("expected_error", false)) {
      EXPECT_FALSE(got.ok()) << id << " should be rejected";
      continue;
    }
    ASSERT_TRUE(got.ok()) << id << ": " << got.status().to_string();
    expect_matches(*got, v["expected"], id);
  }
}

ParsedMessage stream(const std::vector<std::string>& chunks, bool thinking) {
  StreamingParser p(thinking);
  ParsedMessage rebuilt;
  auto absorb = [&](const StreamDelta& d) {
    rebuilt.reasoning_content += d.reasoning;
    rebuilt.content += d.content;
    for (const auto& t : d.tool_calls) {
      if (t.index == static_cast<int>(rebuilt.tool_calls.size())) {
        EXPECT_FALSE(t.name.empty()) << "first delta of a call carries its name";
        rebuilt.tool_calls.push_back({t.name, ""});
      }
      ASSERT_LT(t.index, static_cast<int>(rebuilt.tool_calls.size()));
      rebuilt.tool_calls[t.index].arguments += t.arguments;
    }
    for (const std::string* s : {&d.reasoning, &d.content})
      EXPECT_EQ(s->find("｜DSML｜"), std::string::npos) << "DSML leaked: " << *s;
  };
  for (const std::string& c : chunks) {
    StreamDelta d;
    p.feed(c, &d);
    absorb(d);
  }
  StreamDelta d;
  p.finish(&d);
  absorb(d);
  EXPECT_EQ(rebuilt, p.message()) << "deltas must add up to the message";
  return rebuilt;
}

std::vector<std::string> by_char(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    unsigned char c = s[i];
    if (c >= 0xF0)
      n = 4;
    else if (c >= 0xE0)
      n = 3;
    else if (c >= 0xC0)
      n = 2;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

TEST(ChatParsingConformance, StreamingEqualsStrictUnderEveryChunking) {
  auto tok = tokenizer::Tokenizer::from_file(kShared + "/tokenizers/deepseek_v3");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  std::mt19937 rng(1234);
  for (const Json& v : read_lines("chat_parsing.jsonl")) {
    if (v.value("expected_error", false)) continue;
    std::string id = v["id"];
    std::string text = v["completion_text"];
    bool thinking = v["thinking_mode"] == "thinking";
    auto strict = parse_completion(text, thinking);
    ASSERT_TRUE(strict.ok()) << id;

    EXPECT_EQ(stream({text}, thinking), *strict) << id << " whole";
    EXPECT_EQ(stream(by_char(text), thinking), *strict) << id << " char by char";
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<std::string> chunks;
      for (size_t i = 0; i < text.size();) {
        size_t n = 1 + rng() % 12;  // bytes: may split UTF-8 characters
        chunks.push_back(text.substr(i, n));
        i += n;
      }
      EXPECT_EQ(stream(chunks, thinking), *strict) << id << " random chunks, trial " << trial;
    }
    auto ids = (*tok)->encode(text);
    ASSERT_TRUE(ids.ok());
    std::vector<std::string> tokens;
    for (int32_t t : *ids) tokens.emplace_back(*(*tok)->token_bytes(t));
    EXPECT_EQ(stream(tokens, thinking), *strict) << id << " token by token";
  }
}

}  // namespace
}  // namespace deepinfer::recipe

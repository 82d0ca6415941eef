// Property tests: encode -> parse round trips, and fuzzing of both parsers.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "deepinfer/recipe/chat_encoder.h"
#include "deepinfer/recipe/completion_parser.h"
#include "deepinfer/recipe/streaming_parser.h"

namespace deepinfer::recipe {
namespace {

class Gen {
 public:
  explicit Gen(uint32_t seed) : rng_(seed) {}
  size_t below(size_t n) { return rng_() % n; }
  std::string text(size_t max_len) {
    static const char* kAtoms[] = {"a", "b",  " ", "\n", "<", ">",  "\"", "'", "{",
                                   "}", "\\", "é", "中", "😀", "\t", "/",  "=", "c"};
    std::string s;
    size_t n = below(max_len + 1);
    for (size_t i = 0; i < n; ++i) s += kAtoms[below(std::size(kAtoms))];
    return s;
  }
  std::string ident() {
    std::string s(1 + below(8), 'a');
    for (char& c : s) c = "abcdefghijklmnopqrstuvwxyz_"[below(27)];
    return s;
  }
  Json value(int depth) {
    switch (below(depth > 2 ? 5 : 7)) {
      case 0:
        return text(12);
      case 1:
        return static_cast<int64_t>(below(2000000)) - 1000000;
      case 2:
        return (static_cast<double>(below(100000)) - 50000) / 64.0;
      case 3:
        return below(2) == 1;
      case 4:
        return nullptr;
      case 5: {
        Json a = Json::array();
        for (size_t i = below(4); i > 0; --i) a.push_back(value(depth + 1));
        return a;
      }
      default: {
        Json o = Json::object();
        for (size_t i = below(4); i > 0; --i) o[ident()] = value(depth + 1);
        return o;
      }
    }
  }

 private:
  std::mt19937 rng_;
};

TEST(RecipeProperty, EncodeThenParseRoundTripsAssistantMessages) {
  Gen g(42);
  for (int iter = 0; iter < 300; ++iter) {
    bool thinking = g.below(2) == 1;
    Json asst = {{"role", "assistant"}, {"content", g.text(30)}};
    std::string reasoning = g.text(30);
    if (thinking) asst["reasoning_content"] = reasoning;
    std::vector<Json> args;
    Json calls = Json::array();
    for (size_t i = g.below(4); i > 0; --i) {
      Json a = Json::object();
      for (size_t k = g.below(5); k > 0; --k) a[g.ident()] = g.value(0);
      args.push_back(a);
      // Arguments arrive either as JSON text or as an object.
      Json f = {{"name", g.ident()}, {"arguments", g.below(2) ? Json(python_json_dumps(a)) : a}};
      calls.push_back({{"type", "function"}, {"function", f}});
    }
    if (!calls.empty()) asst["tool_calls"] = calls;
    Json msgs = Json::array({Json{{"role", "user"}, {"content", "q"}}, asst});
    EncodeOptions o;
    o.thinking = thinking;
    o.drop_thinking = false;
    auto prompt = encode_messages(msgs, o);
    ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
    std::string header = std::string(kAssistant) + (thinking ? kThinkOpen : kThinkClose);
    size_t at = prompt->find(header);
    ASSERT_NE(at, std::string::npos);
    std::string completion = prompt->substr(at + header.size());

    auto strict = parse_completion(completion, thinking);
    ASSERT_TRUE(strict.ok()) << strict.status().to_string() << "\n" << Json(completion).dump();
    EXPECT_EQ(strict->content, asst["content"].get<std::string>());
    if (thinking) {
      EXPECT_EQ(strict->reasoning_content, reasoning);
    }
    ASSERT_EQ(strict->tool_calls.size(), calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(strict->tool_calls[i].name, calls[i]["function"]["name"].get<std::string>());
      EXPECT_EQ(Json::parse(strict->tool_calls[i].arguments), args[i])
          << strict->tool_calls[i].arguments;
    }
    StreamingParser sp(thinking);
    StreamDelta d;
    for (size_t i = 0; i < completion.size();) {
      size_t n = 1 + g.below(7);
      sp.feed(std::string_view(completion).substr(i, n), &d);
      i += n;
    }
    sp.finish(&d);
    EXPECT_EQ(sp.message(), *strict);
  }
}

TEST(RecipeProperty, ParsersSurviveRandomBytesAndMarkupSoup) {
  std::mt19937 rng(9);
  static const char* kPieces[] = {"<think>",
                                  "</think>",
                                  "\n\n",
                                  "<｜DSML｜ calls>",
                                  "</｜DSML｜ calls>",
                                  "<｜DSML｜ invoke name=\"",
                                  "\">",
                                  "</｜DSML｜ invoke>",
                                  "<｜DSML｜ parameter name=\"",
                                  "\" string=\"",
                                  "true",
                                  "false",
                                  "</｜DSML｜ parameter>",
                                  "<｜end▁of▁sentence｜>",
                                  "<",
                                  "｜",
                                  "x",
                                  "\xff",
                                  "\xe4\xb8"};
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s;
    size_t n = rng() % 40;
    for (size_t i = 0; i < n; ++i) {
      if (iter % 2)
        s += kPieces[rng() % std::size(kPieces)];
      else
        s.push_back(static_cast<char>(rng() % 256));
    }
    bool thinking = rng() % 2;
    const auto strict = parse_completion(s, thinking);
    StreamingParser p(thinking);
    StreamDelta d;
    for (size_t i = 0; i < s.size();) {
      size_t k = 1 + rng() % 5;
      p.feed(std::string_view(s).substr(i, k), &d);
      i += k;
    }
    p.finish(&d);
    EXPECT_TRUE(p.done());
    // The end-of-stream verdict is the strict parser's, error for error.
    EXPECT_EQ(p.malformed().message(), strict.ok() ? "" : strict.status().message())
        << Json(s).dump();
    for (const std::string* t : {&p.message().content, &p.message().reasoning_content})
      EXPECT_EQ(t->find("｜DSML｜"), std::string::npos) << Json(s).dump();
  }
}

}  // namespace
}  // namespace deepinfer::recipe

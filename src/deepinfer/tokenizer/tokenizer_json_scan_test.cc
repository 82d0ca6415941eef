// The fast tokenizer.json reader against nlohmann's DOM of the same text: wherever the reader
// gives a value, it is the DOM's; where the DOM refuses a text, the reader does too.
#include "deepinfer/tokenizer/tokenizer_json_scan.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "deepinfer/tokenizer/bpe_model.h"
#include "deepinfer/tokenizer/byte_level.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {
namespace {

using VocabMap = std::map<std::string, int32_t>;

// What the reader must give for `text`, from the DOM: nullopt where the DOM refuses the text or
// the document lacks the shape the reader takes (it may then decline too).
struct Expected {
  nlohmann::json rest;
  VocabMap vocab;
  BpeModel::Merges merges;
};
std::optional<Expected> from_dom(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("model") || !j["model"].is_object())
    return std::nullopt;
  nlohmann::json& model = j["model"];
  if (!model.contains("vocab") || !model["vocab"].is_object() || !model.contains("merges") ||
      !model["merges"].is_array())
    return std::nullopt;
  Expected e;
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > (1 << 30))
      return std::nullopt;
    e.vocab[it.key()] = it->get<int32_t>();
  }
  for (const auto& m : model["merges"]) {
    auto& [l, r] = e.merges.emplace_back();
    if (m.is_string()) {
      if (!BpeModel::split_merge(m.get<std::string>(), &l, &r)) return std::nullopt;
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      l = m[0].get<std::string>(), r = m[1].get<std::string>();
    } else {
      return std::nullopt;
    }
  }
  model.erase("vocab");
  model.erase("merges");
  e.rest = std::move(j);
  return e;
}

VocabMap last_wins(const std::vector<std::pair<std::string, int32_t>>& list) {
  VocabMap m;
  for (const auto& [k, v] : list) m[k] = v;
  return m;
}

// The reader's verdict on `text` agrees with the DOM; returns whether the reader took it.
bool agrees_with_dom(const std::string& text) {
  const std::optional<ScannedTokenizerJson> got = scan_tokenizer_json(text);
  const std::optional<Expected> want = from_dom(text);
  if (!want) {
    EXPECT_FALSE(got.has_value()) << "the reader took what the DOM refuses: " << text;
    return false;
  }
  if (!got) return false;
  EXPECT_EQ(got->rest, want->rest) << text;
  EXPECT_EQ(last_wins(got->vocab), want->vocab) << text;
  EXPECT_EQ(got->merges, want->merges) << text;
  return true;
}

std::string wrap(const std::string& vocab, const std::string& merges,
                 const std::string& extra = R"("type": "BPE")") {
  return R"({"version": "1.0", "added_tokens": [{"id": 3, "content": "<x>"}], "model": {)" + extra +
         R"(, "vocab": )" + vocab + R"(, "merges": )" + merges + "}}";
}

TEST(TokenizerJsonScan, TheRealTokenizerReadsAsItsDom) {
  std::ifstream f(std::string(DEEPINFER_SHARED_DIR) + "/tokenizers/deepseek_v3/tokenizer.json",
                  std::ios::binary);
  ASSERT_TRUE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_TRUE(agrees_with_dom(ss.str()));
  const auto got = scan_tokenizer_json(ss.str());
  ASSERT_TRUE(got.has_value());
  EXPECT_GT(got->vocab.size(), 100000u);
  EXPECT_GT(got->merges.size(), 100000u);
}

TEST(TokenizerJsonScan, EscapesUnicodeDuplicatesAndBothMergeFormsReadAsTheDom) {
  const std::string taken[] = {
      wrap(R"({"a": 0, "b": 1, "ab": 2})", R"(["a b"])"),
      wrap(R"({"a":0,"b":1,"ab":2})", R"([["a","b"]])"),
      wrap(" {\n\t\"a\" :\r 0 , \"b\":1 } ", " [ ] "),
      wrap(R"({"\"q\\": 0, "\/\b\f\n\r\t": 1, "\u00e9\u4e2d": 2, "\ud83d\ude00": 3})", "[]"),
      wrap(R"({"\u0000": 0, "é中😀": 1, "Ġthe": 2})", R"(["é 中", ["😀", "Ġthe"]])"),
      wrap(R"({"a": 0, "a": 5, "b": 1073741824})", "[]"),
      wrap("{}", R"(["x y", "  "])"),
      wrap("{}", "[]", R"("type": "BPE", "dropout": null, "type": "X", "deep": [{"a": [1, {}]}])"),
      R"({"model": {"vocab": {}, "merges": []}, "model2": "}]\"{["})",
  };
  for (const std::string& text : taken) EXPECT_TRUE(agrees_with_dom(text)) << text;
}

TEST(TokenizerJsonScan, MalformedOrOddTextsAreLeftToTheDom) {
  const std::string declined[] = {
      "",
      "[]",
      "{",
      wrap(R"({"a": 0})", "[]") + "x",
      wrap(R"({"a": 0,})", "[]"),
      wrap(R"({"a": -1})", "[]"),
      wrap(R"({"a": -0})", "[]"),
      wrap(R"({"a": 1.0})", "[]"),
      wrap(R"({"a": 1e2})", "[]"),
      wrap(R"({"a": 01})", "[]"),
      wrap(R"({"a": 1073741825})", "[]"),
      wrap(R"({"a": "1"})", "[]"),
      wrap(R"({"\ud800": 0})", "[]"),
      wrap(R"({"\udc00\ud800": 0})", "[]"),
      wrap(R"({"\x": 0})", "[]"),
      wrap("{\"a\tb\": 0}", "[]"),
      wrap("{\"\xC0\x80\": 0}", "[]"),
      wrap("{\"\xED\xA0\x80\": 0}", "[]"),
      wrap("{\"\xF5\x80\x80\x80\": 0}", "[]"),
      wrap("{\"\xE2\x82\": 0}", "[]"),
      wrap("{}", R"(["ab"])"),
      wrap("{}", R"([" ab"])"),
      wrap("{}", R"(["a b c"])"),
      wrap("{}", R"([["a"]])"),
      wrap("{}", R"([["a", 1]])"),
      wrap("{}", "{}"),
      R"({"model": {"vocab": {}}})",
      R"({"model": {"vocab": {}, "merges": [], "vocab": {}}})",
      R"({"model": {"vocab": {}, "merges": []}, "model": {"vocab": {}, "merges": []}})",
      R"({"model": {"vocab": {}, "merges": []}, "x": tru})",
  };
  for (const std::string& text : declined) {
    EXPECT_FALSE(scan_tokenizer_json(text).has_value()) << text;
    agrees_with_dom(text);
  }
}

// Random edits of a small document: the reader never takes a text the DOM refuses, and never
// reads one differently.
TEST(TokenizerJsonScan, RandomEditsNeverReadDifferentlyFromTheDom) {
  const std::string base = wrap(R"({"a": 0, "b\n": 1, "é": 12, "\ud83d\ude00": 7})",
                                R"(["a b", ["é", "a"]])", R"("type": "BPE", "x": [1, "]"])");
  const std::string alphabet = "{}[]\",:\\ u0123456789abdeEfnrt-.\xC3\xA9\xED\xF0\x80\x01";
  std::mt19937 rng(7);
  int taken = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text = base;
    for (int e = 1 + static_cast<int>(rng() % 3); e > 0; --e) {
      const size_t at = rng() % (text.size() + 1);
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          text.insert(at, 1, c);
          break;
        case 1:
          if (at < text.size()) text.erase(at, 1);
          break;
        default:
          if (at < text.size()) text[at] = c;
      }
    }
    taken += agrees_with_dom(text);
  }
  EXPECT_GT(taken, 100);  // the property was checked on texts the reader took, not just refusals
}

TEST(TokenizerJsonScan, ATextTheReaderDeclinesStillLoadsThroughTheDom) {
  std::string vocab = "{";
  for (int b = 0; b < 256; ++b) {
    const std::string sym = nlohmann::json(byte_level_encode(std::string(1, char(b)))).dump();
    vocab += sym + ": " + (b == 'a' ? std::string("-0") : std::to_string(b)) + ",";
  }
  vocab += R"("ab": 256})";
  const std::string text = wrap(vocab, R"(["a b"])");
  ASSERT_FALSE(scan_tokenizer_json(text).has_value());
  auto t = Tokenizer::from_json_text(text, "declined.json");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(*(*t)->encode("ab"), std::vector<int32_t>{256});
}

}  // namespace
}  // namespace deepinfer::tokenizer

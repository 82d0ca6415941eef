#include "deepinfer/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "deepinfer/tokenizer/byte_level.h"
#include "deepinfer/tokenizer/incremental_detokenizer.h"
#include "deepinfer/tokenizer/utf8_lossy.h"

namespace deepinfer::tokenizer {
namespace {

const std::string kShared = DEEPINFER_SHARED_DIR;

const Tokenizer& v3() {
  static auto t = Tokenizer::from_file(kShared + "/tokenizers/deepseek_v3");
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return **t;
}

// A tiny byte-level tokenizer: 256 byte symbols, one merge, one added token.
std::string tiny_json() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_encode(std::string(1, static_cast<char>(b)))] = b;
  vocab["ab"] = 256;
  nlohmann::json j = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"pre_tokenizer", nullptr},
      {"added_tokens",
       {{{"id", 300}, {"content", "<X>"}, {"special", true}, {"normalized", false}}}}};
  return j.dump();
}

TEST(Tokenizer, TinyTokenizerMergesAndMatchesAddedTokens) {
  auto t = Tokenizer::from_json_text(tiny_json(), "tiny");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(*(*t)->encode("ab<X>a"), (std::vector<int32_t>{256, 300, 'a'}));
  EXPECT_EQ(*(*t)->encode("ab<X>a", false), (std::vector<int32_t>{256, '<', 'X', '>', 'a'}));
  EXPECT_TRUE((*t)->is_special(300));
  EXPECT_EQ(*(*t)->decode(std::vector<int32_t>{256, 300}, true), "ab");
}

TEST(TokenizerSpans, NonSpecialAddedTokensDoNotMatchInPlainSpansEither) {
  nlohmann::json j = nlohmann::json::parse(tiny_json());
  j["added_tokens"].push_back({{"id", 301}, {"content", "<Y>"}, {"special", false}});
  auto t = Tokenizer::from_json_text(j.dump(), "tiny");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_FALSE((*t)->is_special(301));
  const TextSpan spans[] = {{"ab<X>", true}, {"<X><Y>", false}, {"<Y>", true}};
  EXPECT_EQ(*(*t)->encode_spans(spans),
            (std::vector<int32_t>{256, 300, '<', 'X', '>', '<', 'Y', '>', 301}));
}

TEST(Tokenizer, MalformedFilesGiveErrorsNamingTheField) {
  auto bad_json = Tokenizer::from_json_text("{not json", "f.json");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_NE(bad_json.status().message().find("f.json"), std::string::npos);

  auto no_model = Tokenizer::from_json_text("{}", "f.json");
  ASSERT_FALSE(no_model.ok());
  EXPECT_NE(no_model.status().message().find("model"), std::string::npos);

  auto bad_merge = Tokenizer::from_json_text(
      R"({"model":{"type":"BPE","vocab":{"a":0},"merges":["a"]}})", "f.json");
  ASSERT_FALSE(bad_merge.ok());

  nlohmann::json j = nlohmann::json::parse(tiny_json());
  j["model"]["merges"] = {"a zz"};
  auto missing = Tokenizer::from_json_text(j.dump(), "f.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("merges[0]"), std::string::npos);

  j = nlohmann::json::parse(tiny_json());
  j["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  auto bad_regex = Tokenizer::from_json_text(j.dump(), "f.json");
  ASSERT_FALSE(bad_regex.ok());
  EXPECT_NE(bad_regex.status().message().find("pattern.Regex"), std::string::npos);

  j = nlohmann::json::parse(tiny_json());
  j["normalizer"] = {{"type", "NFKD"}};
  auto bad_norm = Tokenizer::from_json_text(j.dump(), "f.json");
  ASSERT_FALSE(bad_norm.ok());
  EXPECT_NE(bad_norm.status().message().find("NFKD"), std::string::npos);

  j = nlohmann::json::parse(tiny_json());
  j["added_tokens"][0]["id"] = "x";
  auto bad_added = Tokenizer::from_json_text(j.dump(), "f.json");
  ASSERT_FALSE(bad_added.ok());
  EXPECT_NE(bad_added.status().message().find("added_tokens[0].id"), std::string::npos);

  auto missing_file = Tokenizer::from_file("/nonexistent/dir");
  ASSERT_FALSE(missing_file.ok());
  EXPECT_EQ(missing_file.status().code(), StatusCode::kNotFound);
}

TEST(Tokenizer, UnknownIdsAreErrors) {
  const Tokenizer& tok = v3();
  EXPECT_FALSE(tok.decode(std::vector<int32_t>{-1}).ok());
  EXPECT_FALSE(tok.decode(std::vector<int32_t>{tok.vocab_size()}).ok());
  auto st = tok.decode(std::vector<int32_t>{1000000}).status();
  EXPECT_NE(st.message().find("1000000"), std::string::npos);
  IncrementalDetokenizer det(tok);
  std::string d;
  EXPECT_FALSE(det.push(999999, &d).ok());
}

TEST(Tokenizer, SpecialTokenIdsOfTheV3File) {
  const Tokenizer& tok = v3();
  EXPECT_EQ(tok.token_to_id("<｜User｜>"), 128803);
  EXPECT_EQ(tok.token_to_id("<｜Assistant｜>"), 128804);
  EXPECT_EQ(tok.token_to_id("<｜begin▁of▁sentence｜>"), 0);
  EXPECT_EQ(tok.token_to_id("<｜end▁of▁sentence｜>"), 1);
}

TEST(Tokenizer, InvalidUtf8InputDoesNotCrashAndRoundTrips) {
  const Tokenizer& tok = v3();
  std::string s = "ok \xff\xfe bad \xe4\xb8 cut \xf0\x9f\x98";
  auto ids = tok.encode(s);
  ASSERT_TRUE(ids.ok());
  // Byte-level BPE is lossless on bytes; the decoder repairs like from_utf8_lossy.
  EXPECT_EQ(*tok.decode(*ids), utf8_lossy(s));
}

TEST(Utf8Lossy, MaximalSubpartReplacement) {
  EXPECT_EQ(utf8_lossy("a\x80z"), "a\xEF\xBF\xBDz");
  // A truncated 3-byte sequence is one replacement, then the next char survives.
  EXPECT_EQ(utf8_lossy("\xE4\xB8z"), "\xEF\xBF\xBDz");
  // Surrogate encodings are invalid from the second byte on.
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
}

TEST(IncrementalDetokenizer, HoldsSplitCharactersAndNeverDropsBytes) {
  const Tokenizer& tok = v3();
  std::mt19937 rng(7);
  const std::string samples[] = {"emoji 😀👨‍👩‍👧 中文字符 and ascii",
                                 "\xff\xfe broken \xe4\xb8", "日本語のテキスト🇯🇵"};
  for (const std::string& s : samples) {
    auto ids = tok.encode(s, false);
    ASSERT_TRUE(ids.ok());
    IncrementalDetokenizer det(tok);
    std::string all;
    for (int32_t id : *ids) {
      std::string d;
      ASSERT_TRUE(det.push(id, &d).ok());
      EXPECT_EQ(utf8_lossy(d), d) << "delta is not whole UTF-8";
      all += d;
    }
    det.finish(&all);
    EXPECT_EQ(all, *tok.decode(*ids));
  }
  // Byte-by-byte tokens (ids of single bytes) of a 4-byte character: nothing until the last.
  auto ids = tok.encode("😀", false);
  ASSERT_TRUE(ids.ok());
  std::vector<int32_t> byte_ids;
  for (unsigned char c : std::string("😀")) {
    auto one = tok.encode(std::string(1, static_cast<char>(c)), false);
    ASSERT_TRUE(one.ok());
    ASSERT_EQ(one->size(), 1u);
    byte_ids.push_back((*one)[0]);
  }
  IncrementalDetokenizer det(tok);
  std::string out;
  for (size_t i = 0; i < byte_ids.size(); ++i) {
    std::string d;
    ASSERT_TRUE(det.push(byte_ids[i], &d).ok());
    if (i + 1 < byte_ids.size()) {
      EXPECT_EQ(d, "");
    }
    out += d;
  }
  EXPECT_EQ(out, "😀");
}

TEST(Tokenizer, EncodeDecodeRoundTripOnRandomBytes) {
  const Tokenizer& tok = v3();
  std::mt19937 rng(3);
  for (int iter = 0; iter < 200; ++iter) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    auto ids = tok.encode(s, iter % 2 == 0);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*tok.decode(*ids), utf8_lossy(s));
  }
}

}  // namespace
}  // namespace deepinfer::tokenizer

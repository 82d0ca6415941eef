// Every line of shared/conformance/tokenizer_deepseek_v3.jsonl (HF tokenizers 0.23.2 output).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "deepinfer/tokenizer/incremental_detokenizer.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {
namespace {

const std::string kShared = DEEPINFER_SHARED_DIR;

const Tokenizer& v3() {
  static auto t = Tokenizer::from_file(kShared + "/tokenizers/deepseek_v3");
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return **t;
}

std::vector<nlohmann::json> vectors() {
  std::ifstream f(kShared + "/conformance/tokenizer_deepseek_v3.jsonl");
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(TokenizerConformance, EveryVectorMatchesIdsNoSpecialAndDecode) {
  auto vs = vectors();
  ASSERT_GT(vs.size(), 100u);
  const Tokenizer& tok = v3();
  int bad = 0;
  for (size_t i = 0; i < vs.size(); ++i) {
    const std::string text = vs[i]["text"];
    auto want = vs[i]["ids"].get<std::vector<int32_t>>();
    auto want_ns = vs[i]["ids_no_special"].get<std::vector<int32_t>>();
    auto got = tok.encode(text, true);
    auto got_ns = tok.encode(text, false);
    ASSERT_TRUE(got.ok() && got_ns.ok());
    auto dec = tok.decode(want);
    ASSERT_TRUE(dec.ok());
    if (*got != want || *got_ns != want_ns || *dec != text) {
      if (++bad <= 10)
        ADD_FAILURE() << "line " << i + 1 << " text=" << nlohmann::json(text).dump() << "\n want "
                      << nlohmann::json(want).dump() << "\n got  " << nlohmann::json(*got).dump()
                      << "\n want_ns " << nlohmann::json(want_ns).dump() << "\n got_ns  "
                      << nlohmann::json(*got_ns).dump() << "\n decode "
                      << nlohmann::json(*dec).dump();
    }
  }
  EXPECT_EQ(bad, 0) << "of " << vs.size();
}

TEST(TokenizerConformance, StreamingDecodeEqualsDecodeOnEveryVector) {
  const Tokenizer& tok = v3();
  for (const auto& v : vectors()) {
    auto ids = v["ids"].get<std::vector<int32_t>>();
    IncrementalDetokenizer det(tok);
    std::string streamed;
    for (int32_t id : ids) {
      std::string d;
      ASSERT_TRUE(det.push(id, &d).ok());
      streamed += d;
    }
    det.finish(&streamed);
    EXPECT_EQ(streamed, v["text"].get<std::string>());
  }
}

}  // namespace
}  // namespace deepinfer::tokenizer

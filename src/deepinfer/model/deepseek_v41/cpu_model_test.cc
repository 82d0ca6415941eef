// v41::CpuModel's error contract: what it refuses to load or run, and that each error names the
// file, field or token at fault.
#include "deepinfer/model/deepseek_v41/cpu_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/model/deepseek_v41/engram.h"
#include "deepinfer/model/deepseek_v41/golden_v41_fixture.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer::v41 {
namespace {

namespace fs = std::filesystem;

bool mentions(const Status& s, const std::string& what) {
  return s.message().find(what) != std::string::npos;
}

TEST(V41CpuModel, EngramModelWithoutTokenizerNamesTheFile) {
  const fs::path src = testing::fixture_dir("v41_engram_ratio1");
  const fs::path dir = fs::path(::testing::TempDir()) / "v41_engram_no_tokenizer";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"}) fs::create_symlink(src / f, dir / f);
  auto m = CpuModel::load(dir.string());
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(mentions(m.status(), (dir / "tokenizer.json").string())) << m.status().to_string();
  fs::remove_all(dir);
}

TEST(V41CpuModel, OfficialNumericsIsRefused) {
  auto m = CpuModel::load(testing::fixture_dir("v41_single_src_alltopk"),
                          ModelOptions::with_numerics(v4::Numerics::kOfficial));
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(mentions(m.status(), "plain")) << m.status().to_string();
}

TEST(V41CpuModel, TokensOutsideTheVocabularyAreRefusedByPosition) {
  auto m = CpuModel::load(testing::fixture_dir("v41_single_src_alltopk"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  SequenceState s = (*m)->new_sequence();
  const std::vector<int32_t> ids = {5, 7, static_cast<int32_t>((*m)->config().vocab_size)};
  std::vector<float> logits;
  const Status st = (*m)->forward(s, ids.data(), 3, false, &logits);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(mentions(st, "position 2")) << st.to_string();
  EXPECT_EQ(s.num_tokens, 0);  // nothing was consumed
}

// A vocabulary padded past the tokenizer, as the real one is (129280 against 128815): an id there
// runs with the Engram pad's compressed id (decision 0016), so a model that samples one can be fed
// it back.
TEST(V41CpuModel, IdsPastTheTokenizerRunWithTheEngramPadsId) {
  // The tiny preset's vocabulary is the tokenizer's: pad it by 16 ids.
  std::ifstream in(tiny_model_dir_for_test() + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  nlohmann::json& text = cfg.contains("text_config") ? cfg["text_config"] : cfg;
  text["vocab_size"] = text["vocab_size"].get<int64_t>() + 16;
  const fs::path base = fs::path(::testing::TempDir()) / "v41_padded_vocab";
  fs::remove_all(base);
  fs::create_directories(base);
  std::ofstream(base / "config.json") << cfg.dump(2);
  v4::TinyModelOptions o;
  o.config_path = (base / "config.json").string();
  o.tokenizer_dir = v4::tests_source_dir() + "/assets/tokenizers/deepseek_v3";
  const std::string dir = (base / "model").string();
  ASSERT_TRUE(v41::write_tiny_model(dir, o).ok());
  auto m = CpuModel::load(dir);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const Config& c = (*m)->config();
  auto tok = tokenizer::Tokenizer::from_file(dir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const int64_t known = (*tok)->vocab_size();
  ASSERT_LT(known, c.vocab_size);
  auto ckpt = Checkpoint::open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  auto tables = load_engram_tables(c, dir, **ckpt);
  ASSERT_TRUE(tables.ok()) << tables.status().to_string();
  ASSERT_EQ(static_cast<int64_t>(tables->token_map.size()), c.vocab_size);
  for (int64_t id = known; id < c.vocab_size; ++id)
    ASSERT_EQ(tables->token_map[id], tables->token_map[c.engram.pad_id]) << "id " << id;
  SequenceState s = (*m)->new_sequence();
  const std::vector<int32_t> ids = {5, static_cast<int32_t>(c.vocab_size - 1), 7};
  std::vector<float> logits;
  ASSERT_TRUE((*m)->forward(s, ids.data(), 3, true, &logits).ok());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  fs::remove_all(base);
}

TEST(V41CpuModel, StateOfAnotherModelIsRefused) {
  auto single = CpuModel::load(testing::fixture_dir("v41_single_src_alltopk"));
  auto multi = CpuModel::load(testing::fixture_dir("v41_multi_src_alltopk"));
  ASSERT_TRUE(single.ok() && multi.ok());
  SequenceState s = (*multi)->new_sequence();
  const int32_t id = 3;
  std::vector<float> logits;
  EXPECT_FALSE((*single)->forward(s, &id, 1, false, &logits).ok());
}

TEST(V41CpuModel, LastRowOnlyEqualsTheLastOfAllRows) {
  auto m = CpuModel::load(testing::fixture_dir("v41_engram_ratio1"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const std::vector<int32_t> ids = {10, 20, 30, 40, 50};
  SequenceState a = (*m)->new_sequence(), b = (*m)->new_sequence();
  std::vector<float> all, last;
  ASSERT_TRUE((*m)->forward(a, ids.data(), 5, true, &all).ok());
  ASSERT_TRUE((*m)->forward(b, ids.data(), 5, false, &last).ok());
  const int64_t V = (*m)->config().vocab_size;
  ASSERT_EQ(last.size(), static_cast<size_t>(V));
  EXPECT_EQ(std::vector<float>(all.end() - V, all.end()), last);
}

}  // namespace
}  // namespace deepinfer::v41

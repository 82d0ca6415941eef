// v41::CpuModel's error contract: what it refuses to load or run, and that each error names the
// file, field or token at fault.
#include "deepinfer/model/deepseek_v41/cpu_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "deepinfer/model/deepseek_v41/golden_v41_fixture.h"

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
  auto m =
      CpuModel::load(testing::fixture_dir("v41_single_src_alltopk"), {v4::Numerics::kOfficial});
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

// The v41-default preset (tiny_model.h): written in the released layout, it loads, runs a forward
// with finite logits, has every layer role the preset promises, and gives the same logits
// bitwise for any chunking of prefill and decode.
#include "deepinfer/model/deepseek_v41/tiny_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"
#include "deepinfer/model/model_family.h"

namespace deepinfer::v41 {
namespace {

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(pick(rng));
  return ids;
}

TEST(TinyModelV41, WritesTheReleasedCompositeLayout) {
  const std::string& dir = tiny_model_dir_for_test();
  std::ifstream f(dir + "/config.json");
  const nlohmann::json cj = nlohmann::json::parse(f);
  EXPECT_EQ(cj["model_type"], "deepseek_v41");
  EXPECT_EQ(cj["text_config"]["model_type"], "deepseek_v41_text");
  auto family = detect_model_family(dir);
  ASSERT_TRUE(family.ok()) << family.status().to_string();
  EXPECT_EQ(*family, ModelFamily::kDeepseekV41);
  auto c = load_config(dir);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  // Every role: ratio-2 and ratio-1 sources with consumers, reuse, re-index inside the
  // candidate blocks, the candidate source, Engram layers.
  EXPECT_EQ(c->layers[2].kv, KvRole::kSource);
  EXPECT_EQ(c->layers[3].kv, KvRole::kConsumer);
  EXPECT_EQ(c->layers[3].index, IndexRole::kReuse);
  EXPECT_TRUE(c->is_candidate_source(4));
  EXPECT_EQ(c->layers[5].index, IndexRole::kReuse);
  EXPECT_EQ(c->layers[6].index, IndexRole::kReindex);
  EXPECT_TRUE(c->uses_candidates(6));
  EXPECT_TRUE(c->is_engram_layer(1));
  EXPECT_TRUE(c->is_engram_layer(4));
  EXPECT_EQ(c->compress_ratio(2), 2);
  EXPECT_EQ(c->compress_ratio(4), 1);
}

TEST(TinyModelV41, UnknownPresetIsNamed) {
  v4::TinyModelOptions o;
  o.preset = "v41-nope";
  Status st = v41::write_tiny_model(::testing::TempDir() + "/never", o);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.to_string().find("v41-nope"), std::string::npos) << st.to_string();
}

// The big preset's config alone (its tensors take ~60 GB): V4.1-Flash's dims (spec §11.1), the
// 8-layer schedule's roles, and Engram tables shrunk as the preset's doc says.
TEST(TinyModelV41, Flash8LayerConfigHasTheRealDimsAndShrunkEngram) {
  auto text = tiny_model_config_json(
      "v41-flash-8layer", std::string(DEEPINFER_SOURCE_DIR) + "/assets/tokenizers/deepseek_v3");
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  auto c = parse_config_json(*text, "v41-flash-8layer");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->num_layers, 8);
  EXPECT_EQ(c->vocab_size, 129280);
  EXPECT_EQ(c->hidden_size, 5120);
  EXPECT_EQ(c->num_heads, 64);
  EXPECT_EQ(c->head_dim, 512);
  EXPECT_EQ(c->rope_dim, 64);
  EXPECT_EQ(c->q_lora_rank, 1280);
  EXPECT_EQ(c->o_lora_rank, 1024);
  EXPECT_EQ(c->o_groups, 8);
  EXPECT_EQ(c->sliding_window, 128);
  EXPECT_EQ(c->index_n_heads, 32);
  EXPECT_EQ(c->index_head_dim, 128);
  EXPECT_EQ(c->index_topk, 512);
  EXPECT_EQ(c->candidate_topk_blocks, 2048);
  EXPECT_EQ(c->candidate_block_size, 8);
  EXPECT_EQ(c->n_routed_experts, 384);
  EXPECT_EQ(c->experts_per_token, 6);
  EXPECT_EQ(c->moe_intermediate_size, 2304);
  EXPECT_EQ(c->weight_block_rows, 32);
  EXPECT_EQ(c->weight_block_cols, 32);
  EXPECT_EQ(c->engram.max_ngram_size, 4);
  EXPECT_EQ(c->engram.n_heads, 8);
  EXPECT_EQ(c->engram.head_dim, 256);
  EXPECT_TRUE(c->is_kv_source(2) && c->is_kv_source(4) && c->is_candidate_source(4));
  EXPECT_TRUE(c->uses_candidates(6) && c->is_engram_layer(1) && c->is_engram_layer(4));
  // 24 columns, each a prime just above 160,000: ~3.84M rows per table.
  ASSERT_EQ(c->engram.num_embeddings.size(), 2u);
  for (int64_t rows : c->engram.num_embeddings) {
    EXPECT_GT(rows, 24 * 160000);
    EXPECT_LT(rows, 24 * 161000);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The streamed writer (the v41-flash-8layer preset's) lays a preset out exactly as the in-memory
// path does (same index, names, dtypes and shapes; other values: each tensor drawn from (seed,
// name, shape)), and what it writes loads and runs. The DSpark preset written streamed shares
// the default preset's tensors bit for bit, which only (seed, name, shape) seeding gives.
TEST(TinyModelV41Streamed, WritesTheInMemoryLayoutAndLoadsAndRuns) {
  const std::string tmp = ::testing::TempDir() + "/v41_streamed_" + std::to_string(::getpid());
  v4::TinyModelOptions o;
  o.quantized = true;
  o.seed = 3;
  o.preset = "v41-default";
  o.tokenizer_dir = v4::tests_source_dir() + "/assets/tokenizers/deepseek_v3";
  ASSERT_TRUE(v41::write_tiny_model(tmp + "/in_memory", o).ok());
  o.streamed = true;
  const Status st = v41::write_tiny_model(tmp + "/streamed", o);
  ASSERT_TRUE(st.ok()) << st.to_string();
  o.preset = "v41-dspark";
  ASSERT_TRUE(v41::write_tiny_model(tmp + "/dspark", o).ok());
  const std::string index = "/model.safetensors.index.json";
  EXPECT_EQ(read_file(tmp + "/streamed" + index), read_file(tmp + "/in_memory" + index));
  EXPECT_EQ(read_file(tmp + "/streamed/config.json"), read_file(tmp + "/in_memory/config.json"));
  auto a = Checkpoint::open(tmp + "/in_memory");
  auto b = Checkpoint::open(tmp + "/streamed");
  auto d = Checkpoint::open(tmp + "/dspark");
  ASSERT_TRUE(a.ok() && b.ok() && d.ok());
  ASSERT_EQ((*a)->canonical_names(), (*b)->canonical_names());
  size_t differ = 0;
  for (const std::string& name : (*a)->canonical_names()) {
    const TensorInfo& x = *(*a)->find(name);
    const TensorInfo& y = *(*b)->find(name);
    EXPECT_EQ(x.dtype, y.dtype) << name;
    EXPECT_EQ(x.shape, y.shape) << name;
    differ += x.nbytes != y.nbytes || std::memcmp(x.data, y.data, x.nbytes) != 0;
    const TensorInfo* z = (*d)->find(name);
    ASSERT_NE(z, nullptr) << name;
    EXPECT_TRUE(z->nbytes == y.nbytes && std::memcmp(z->data, y.data, y.nbytes) == 0) << name;
  }
  EXPECT_GT(differ, (*a)->canonical_names().size() / 2);  // another generator's values
  EXPECT_GT((*d)->canonical_names().size(), (*b)->canonical_names().size());  // the draft layers

  auto m = CpuModel::load(tmp + "/streamed");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const auto ids = random_ids(20, (*m)->config().vocab_size, 5);
  SequenceState s = (*m)->new_sequence();
  std::vector<float> logits;
  ASSERT_TRUE((*m)->forward(s, ids.data(), int64_t(ids.size()), false, &logits).ok());
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  EXPECT_NE(*std::min_element(logits.begin(), logits.end()),
            *std::max_element(logits.begin(), logits.end()));
  std::filesystem::remove_all(tmp);
}

class TinyModelV41Forward : public ::testing::TestWithParam<bool> {};

TEST_P(TinyModelV41Forward, FiniteLogitsAndBitwisePathIndependence) {
  auto m = CpuModel::load(tiny_model_dir_for_test(GetParam()));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const CpuModel& model = **m;
  const int64_t n = 60;  // past the window (16) and several candidate blocks of ratio 1
  const auto ids = random_ids(n, model.config().vocab_size, 7);
  SequenceState one = model.new_sequence();
  std::vector<float> want;
  ASSERT_TRUE(model.forward(one, ids.data(), n, true, &want).ok());
  for (float x : want) ASSERT_TRUE(std::isfinite(x));
  // Not all equal: the weights reach the logits.
  EXPECT_NE(*std::min_element(want.begin(), want.end()),
            *std::max_element(want.begin(), want.end()));

  const int64_t vocab = model.config().vocab_size;
  for (int64_t chunk : {1, 7, 23}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    SequenceState s = model.new_sequence();
    std::vector<float> got;
    for (int64_t pos = 0; pos < n; pos += chunk) {
      const int64_t len = std::min(chunk, n - pos);
      ASSERT_TRUE(model.forward(s, &ids[pos], len, true, &got).ok());
      for (int64_t i = 0; i < len * vocab; ++i)
        ASSERT_EQ(got[i], want[pos * vocab + i]) << "position " << pos + i / vocab;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PlainAndQuantized, TinyModelV41Forward, ::testing::Bool());

}  // namespace
}  // namespace deepinfer::v41

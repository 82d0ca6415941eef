// YOCO prefill truncation (issue 19, DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=compact): positions
// before keep_from_pos skip the final layer's MoE and the head; for V4.1 the layers after the
// last one with cached state run only the rows later rows and steps read (yoco_rows.h). The
// kept positions' logits and everything the state carries on must be bitwise those of the full
// forward with the same chunking, for both model families; the skipped rows are NaN, never
// stale numbers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"
#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"
#include "deepinfer/model/deepseek_v41/yoco_rows.h"

namespace deepinfer {
namespace {

std::vector<int32_t> random_ids(int n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(2 + rng() % (vocab - 2));
  return ids;
}

bool same_bits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

// Runs `ids` in chunks of `chunk` with all-position logits (keep_from 0: no truncation), then
// three decode tokens; returns every logits row, prompt then decode.
template <class Model>
std::vector<float> run(const Model& m, const std::vector<int32_t>& ids, int64_t chunk,
                       int64_t keep_from) {
  auto st = m.new_sequence();
  std::vector<float> all, part;
  const int64_t n = static_cast<int64_t>(ids.size());
  for (int64_t at = 0; at < n; at += chunk) {
    const int64_t len = std::min(chunk, n - at);
    EXPECT_TRUE(m.forward(st, &ids[at], len, /*all_logits=*/true, &part, keep_from).ok());
    all.insert(all.end(), part.begin(), part.end());
  }
  for (int32_t t : {11, 12, 13}) {
    EXPECT_TRUE(m.forward(st, &t, 1, /*all_logits=*/false, &part, 0).ok());
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

template <class Model>
void expect_kept_logits_unchanged(const Model& m, std::vector<int64_t> keeps = {1, 140}) {
  const int64_t vocab = m.config().vocab_size;
  const std::vector<int32_t> ids = random_ids(200, vocab, 3);  // past a 128-token page
  const int64_t n = static_cast<int64_t>(ids.size());
  for (int64_t chunk : {int64_t{200}, int64_t{37}}) {
    const std::vector<float> full = run(m, ids, chunk, 0);
    for (int64_t keep : keeps) {  // 140: DeepSeek's default
      const int64_t keep_from = n - keep;
      const std::vector<float> cut = run(m, ids, chunk, keep_from);
      ASSERT_EQ(cut.size(), full.size());
      for (int64_t r = 0; r < n + 3; ++r) {
        const float* a = &full[r * vocab];
        const float* b = &cut[r * vocab];
        if (r < keep_from) {
          for (int64_t v = 0; v < vocab; ++v)
            ASSERT_TRUE(std::isnan(b[v])) << "skipped row " << r << " holds a number";
        } else {
          EXPECT_TRUE(same_bits(a, b, vocab))
              << "row " << r << " (chunk " << chunk << ", keep " << keep << ")";
        }
      }
    }
  }
}

TEST(YocoTruncation, DeepseekV4KeptLogitsAndLaterStepsAreBitwiseUnchanged) {
  v4::TinyModelOptions o;
  o.quantized = true;
  o.seed = 23;
  const std::string dir = v4::write_tiny_model_for_test("yoco_v4", o);
  for (v4::Numerics num : {v4::Numerics::kOfficial, v4::Numerics::kPlain}) {
    auto m = v4::CpuModel::load(dir, v4::ModelOptions::with_numerics(num));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    expect_kept_logits_unchanged(**m);
  }
}

TEST(YocoTruncation, DeepseekV41KeptLogitsAndLaterStepsAreBitwiseUnchanged) {
  auto m = v41::CpuModel::load(v41::tiny_model_dir_for_test(/*quantized=*/true));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  expect_kept_logits_unchanged(**m);
}

// The tiny V4.1 preset ends on an index source (nothing trails it); this variant makes layer 4
// the last index source, so layers 5 and 6 (consumers of source 4 reusing its top-k, window 16)
// are trimmed to their horizons.
std::string v41_model_with_trailing_layers() {
  const std::string& base = v41::tiny_model_dir_for_test(/*quantized=*/true);
  std::ifstream in(base + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  nlohmann::json& text = cfg.contains("text_config") ? cfg["text_config"] : cfg;
  text["index_source_layer_ids"] = {2, 4};
  const std::string dir = ::testing::TempDir() + "/yoco_v41_trailing_" + std::to_string(::getpid());
  const std::string path = dir + ".config.json";
  std::ofstream(path) << cfg.dump(2);
  v4::TinyModelOptions o;
  o.config_path = path;
  o.quantized = true;
  o.tokenizer_dir = std::string(DEEPINFER_SOURCE_DIR) + "/assets/tokenizers/deepseek_v3";
  Status st = v41::write_tiny_model(dir, o);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return dir;
}

TEST(YocoTruncation, DeepseekV41TrailingLayersRunOnlyTheirHorizons) {
  const std::string dir = v41_model_with_trailing_layers();
  auto m = v41::CpuModel::load(dir);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const v41::Config& c = (*m)->config();
  ASSERT_EQ(v41::first_trailing_layer(c), 5);
  ASSERT_EQ(c.sliding_window, 16);
  // 200 rows, logits from row 60 (keep 140): layer 6's MoE from 60, its attention from
  // 60 - 15 = 45; layer 5's MoE from 45, attention from 30; layers 0-4 whole.
  const std::vector<v41::LayerRows> rows = v41::yoco_layer_rows(c, 200, 60);
  ASSERT_EQ(rows.size(), 7u);
  for (int l = 0; l < 5; ++l) EXPECT_EQ(rows[l].attn_from + rows[l].ffn_from, 0) << l;
  EXPECT_EQ(rows[6].ffn_from, 60);
  EXPECT_EQ(rows[6].attn_from, 45);
  EXPECT_EQ(rows[5].ffn_from, 45);
  EXPECT_EQ(rows[5].attn_from, 30);
  // Keeping 1 of 200: the next step's window (the last 16 rows) bounds the attention.
  const std::vector<v41::LayerRows> one = v41::yoco_layer_rows(c, 200, 199);
  EXPECT_EQ(one[6].ffn_from, 199);
  EXPECT_EQ(one[6].attn_from, 184);
  EXPECT_EQ(one[5].ffn_from, 184);
  EXPECT_EQ(one[5].attn_from, 169);
  // A chunk none of whose logits are needed still writes the 15 window rows the next call's
  // first row reads.
  const std::vector<v41::LayerRows> none = v41::yoco_layer_rows(c, 37, 37);
  EXPECT_EQ(none[6].ffn_from, 37);
  EXPECT_EQ(none[6].attn_from, 22);
  EXPECT_EQ(none[5].attn_from, 7);
  const std::vector<v41::LayerRows> short_chunk = v41::yoco_layer_rows(c, 10, 10);
  EXPECT_EQ(short_chunk[6].attn_from, 0);
  // Exactness: keeps that trim inside one chunk, across chunks and almost nothing.
  expect_kept_logits_unchanged(**m, {1, 20, 140, 190});
}

}  // namespace
}  // namespace deepinfer

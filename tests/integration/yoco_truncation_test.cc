// YOCO prefill truncation (issue 19, DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=compact): positions
// before keep_from_pos skip the final layer's MoE and the head. The kept positions' logits and
// everything the state carries on must be bitwise those of the full forward with the same
// chunking, for both model families; the skipped rows are NaN, never stale numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"
#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"

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
void expect_kept_logits_unchanged(const Model& m) {
  const int64_t vocab = m.config().vocab_size;
  const std::vector<int32_t> ids = random_ids(200, vocab, 3);  // past a 128-token page
  const int64_t n = static_cast<int64_t>(ids.size());
  for (int64_t chunk : {int64_t{200}, int64_t{37}}) {
    const std::vector<float> full = run(m, ids, chunk, 0);
    for (int64_t keep : {int64_t{1}, int64_t{140}}) {  // 140: DeepSeek's default
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
    auto m = v4::CpuModel::load(dir, {num, std::nullopt});
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    expect_kept_logits_unchanged(**m);
  }
}

TEST(YocoTruncation, DeepseekV41KeptLogitsAndLaterStepsAreBitwiseUnchanged) {
  auto m = v41::CpuModel::load(v41::tiny_model_dir_for_test(/*quantized=*/true));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  expect_kept_logits_unchanged(**m);
}

}  // namespace
}  // namespace deepinfer

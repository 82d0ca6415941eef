// The V4.1 CPU forward gives the same logits however a sequence is cut into calls (DESIGN.md
// numerics): chunks of 1, 7, 41 and 150 tokens against one call over the whole row, on every
// golden_v41 fixture (their weights and inputs; nothing here is compared with transformers).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "deepinfer/model/deepseek_v41/golden_v41_fixture.h"

namespace deepinfer::v41 {
namespace {

constexpr double kTolerance = 1e-5;

std::vector<float> run_chunked(const CpuModel& model, const std::vector<int32_t>& ids,
                               int64_t chunk) {
  SequenceState s = model.new_sequence();
  std::vector<float> all, part;
  const int64_t T = static_cast<int64_t>(ids.size());
  for (int64_t t = 0; t < T; t += chunk) {
    const int64_t n = std::min(chunk, T - t);
    EXPECT_TRUE(model.forward(s, &ids[t], n, true, &part).ok());
    all.insert(all.end(), part.begin(), part.end());
  }
  EXPECT_EQ(s.num_tokens, T);
  return all;
}

class V41PathIndependence : public ::testing::TestWithParam<const char*> {};

TEST_P(V41PathIndependence, AnyChunkingGivesTheSameLogits) {
  const char* name = GetParam();
  auto model = CpuModel::load(testing::fixture_dir(name));
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  for (int row = 0; row < 2; ++row) {
    const testing::GoldenRow g = testing::load_row(name, row);
    ASSERT_FALSE(g.ids.empty());
    const int64_t V = g.vocab, T = static_cast<int64_t>(g.ids.size());
    const std::vector<float> whole = run_chunked(**model, g.ids, T);
    const double scale = testing::logit_scale(g);
    for (int64_t chunk : {1, 7, 41, 150}) {
      const std::vector<float> got = run_chunked(**model, g.ids, chunk);
      ASSERT_EQ(got.size(), whole.size());
      double worst = 0;
      for (int64_t t = 0; t < T; ++t)
        worst = std::max(worst, testing::max_abs_diff(&got[t * V], &whole[t * V], V));
      EXPECT_LE(worst, kTolerance * scale) << name << " row " << row << " chunk " << chunk;
      std::printf("%s row %d: chunks of %lld vs one call: max |diff| / scale %.3g\n", name, row,
                  static_cast<long long>(chunk), worst / scale);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V41PathIndependence, ::testing::ValuesIn(testing::kFixtures));

}  // namespace
}  // namespace deepinfer::v41

// CPU forward (plain numerics, fp32) against transformers 5.17's DeepseekV4ForCausalLM logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "golden_fixture.h"

namespace deepinfer::v4 {
namespace {

using deepinfer::testing::golden_dir;
using deepinfer::testing::load_fixture;
using deepinfer::testing::row_rel_err;

constexpr double kTolerance = 1e-4;

std::unique_ptr<CpuModel> load_plain(const std::string& name) {
  auto m = CpuModel::load(golden_dir(name), ModelOptions::with_numerics(Numerics::kPlain));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(m).value() : nullptr;
}

// Where transformers' full-sequence and prefill+decode paths agree (no exact ties at the
// indexer's top-k boundary), ours must match both at every position, as one prefill and as
// prefill + token-by-token decode.
class GoldenAgreeingPaths : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenAgreeingPaths, MatchesTransformersAtEveryPosition) {
  auto fx = load_fixture(GetParam());
  auto model = load_plain(GetParam());
  ASSERT_TRUE(model && !fx.ids.empty());
  const int64_t L = fx.ids.size(), V = fx.vocab;
  ASSERT_EQ(V, model->config().vocab_size);

  SequenceState one = model->new_sequence();
  std::vector<float> logits;
  ASSERT_TRUE(model->forward(one, fx.ids.data(), L, true, &logits).ok());

  SequenceState inc = model->new_sequence();
  std::vector<float> inc_logits, step;
  ASSERT_TRUE(model->forward(inc, fx.ids.data(), fx.prefill_len, true, &step).ok());
  inc_logits = step;
  for (int64_t t = fx.prefill_len; t < L; ++t) {
    ASSERT_TRUE(model->forward(inc, &fx.ids[t], 1, true, &step).ok());
    inc_logits.insert(inc_logits.end(), step.begin(), step.end());
  }
  double worst = 0;
  for (int64_t t = 0; t < L; ++t) {
    worst = std::max({worst, row_rel_err(&logits[t * V], &fx.logits_full[t * V], V),
                      row_rel_err(&inc_logits[t * V], &fx.logits_decode[t * V], V)});
    EXPECT_LE(row_rel_err(&logits[t * V], &fx.logits_full[t * V], V), kTolerance) << "pos " << t;
    EXPECT_LE(row_rel_err(&logits[t * V], &fx.logits_decode[t * V], V), kTolerance) << "pos " << t;
    EXPECT_LE(row_rel_err(&inc_logits[t * V], &fx.logits_decode[t * V], V), kTolerance)
        << "pos " << t;
  }
  std::printf("%s: max rel err vs transformers over %lld positions: %.3g\n", GetParam(),
              static_cast<long long>(L), worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenAgreeingPaths,
                         ::testing::Values("mixed_fullk", "sliding_hash", "hca_clamp",
                                           "selective_noties"));

// mixed_selective: transformers' two paths break exact indexer ties (ReLU-zero scores)
// differently from position 22 on (docs/decisions/0001-transformers-topk-discrepancy.md).
// Before the first tie both paths and ours agree.
TEST(GoldenSelectiveTies, MatchesTransformersBeforeTheFirstTie) {
  auto fx = load_fixture("mixed_selective");
  auto model = load_plain("mixed_selective");
  ASSERT_TRUE(model && !fx.ids.empty());
  const int64_t L = fx.ids.size(), V = fx.vocab;
  int64_t split = L;
  for (int64_t t = 0; t < L && split == L; ++t)
    if (row_rel_err(&fx.logits_decode[t * V], &fx.logits_full[t * V], V) > kTolerance) split = t;
  ASSERT_EQ(split, 22) << "fixture changed: transformers' paths should part at position 22";
  SequenceState s = model->new_sequence();
  std::vector<float> logits;
  ASSERT_TRUE(model->forward(s, fx.ids.data(), L, true, &logits).ok());
  for (int64_t t = 0; t < split; ++t)
    EXPECT_LE(row_rel_err(&logits[t * V], &fx.logits_full[t * V], V), kTolerance) << "pos " << t;
}

}  // namespace
}  // namespace deepinfer::v4

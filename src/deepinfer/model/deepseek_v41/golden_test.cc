// The V4.1 CPU forward (plain numerics, fp32) against transformers' deepseek_v41 logits in
// shared/golden_v41: one prefill of all 150 tokens against `cached_full_logits`, and a 41-token
// prefill followed by one-token decode steps against `incremental_logits`, for every fixture and
// both input rows.
//
// transformers' own two cached paths part at a few positions (golden_v41/README.md surprises 2-3:
// a fake-quantization bucket or an index-score near-tie flips differently for the two shapes).
// Those positions are found from the reference alone (cached_full vs incremental beyond the
// tolerance), counted and printed, and left out; everywhere else ours must match both, except at
// the listed engine-side blips below.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "deepinfer/model/deepseek_v41/golden_v41_fixture.h"

namespace deepinfer::v41 {
namespace {

using testing::GoldenRow;
using testing::max_abs_diff;

constexpr double kTolerance = 1e-4;
constexpr int64_t kPrefill = 41;  // the fixtures' incremental path (expected.json "prefill")

// Engine-side blips: positions where transformers' two cached paths agree, but our fp32 rounding
// (a different summation order) leaves one fake-quantized value on the other side of a rounding
// boundary. Each was traced to the value: moving it across the boundary by a relative 2e-6 brings
// the position back to ~1e-6 x scale (deepseek_v41/README.md, "Where ours parts from
// transformers"). Only these positions are held to kEngineBlipTolerance instead.
struct EngineBlip {
  const char* fixture;
  int row;
  int64_t pos;
};
constexpr EngineBlip kEngineBlips[] = {
    // Layer 4's window KV of token 81, dim 27: 8e-7 (relative) from an FP8 rounding midpoint.
    {"v41_single_src_alltopk", 1, 82},
};
constexpr double kEngineBlipTolerance = 1e-3;

bool is_engine_blip(const std::string& fixture, int row, int64_t pos) {
  for (const EngineBlip& b : kEngineBlips)
    if (fixture == b.fixture && row == b.row && pos == b.pos) return true;
  return false;
}

std::unique_ptr<CpuModel> load_model(const std::string& name) {
  auto m = CpuModel::load(testing::fixture_dir(name));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(m).value() : nullptr;
}

// Ours over the whole row, as one prefill or as kPrefill tokens then one token per call.
std::vector<float> run(const CpuModel& model, const std::vector<int32_t>& ids, bool decode) {
  SequenceState s = model.new_sequence();
  std::vector<float> all, step;
  const int64_t T = static_cast<int64_t>(ids.size());
  const int64_t first = decode ? kPrefill : T;
  EXPECT_TRUE(model.forward(s, ids.data(), first, true, &all).ok());
  for (int64_t t = first; t < T; ++t) {
    EXPECT_TRUE(model.forward(s, &ids[t], 1, true, &step).ok());
    all.insert(all.end(), step.begin(), step.end());
  }
  return all;
}

class V41Golden : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(V41Golden, PrefillAndDecodeMatchTransformersWhereItsPathsAgree) {
  const auto [name, row] = GetParam();
  const GoldenRow g = testing::load_row(name, row);
  auto model = load_model(name);
  ASSERT_TRUE(model && !g.ids.empty());
  const int64_t T = static_cast<int64_t>(g.ids.size()), V = g.vocab;
  ASSERT_EQ(V, model->config().vocab_size);
  const std::vector<float> prefill = run(*model, g.ids, false);
  const std::vector<float> decode = run(*model, g.ids, true);
  ASSERT_EQ(prefill.size(), static_cast<size_t>(T * V));
  ASSERT_EQ(decode.size(), static_cast<size_t>(T * V));

  // Errors relative to the row's logit scale (README "Tolerance": max |full_logits_b|).
  const double scale = testing::logit_scale(g), limit = kTolerance * scale;
  double worst_prefill = 0, worst_decode = 0, engine_blip = 0;
  int64_t engine_blips = 0, match_cached = 0, match_incremental = 0;
  std::vector<int64_t> split;
  for (int64_t t = 0; t < T; ++t) {
    const float* cached = &g.cached_full[t * V];
    const float* inc = &g.incremental[t * V];
    const double e_prefill = max_abs_diff(&prefill[t * V], cached, V);
    const double e_decode = max_abs_diff(&decode[t * V], inc, V);
    if (max_abs_diff(inc, cached, V) > limit) {
      // Informational: which of transformers' paths ours follows there.
      split.push_back(t);
      match_cached += e_prefill <= limit;
      match_incremental += max_abs_diff(&prefill[t * V], inc, V) <= limit;
      continue;
    }
    if (is_engine_blip(name, row, t)) {
      ++engine_blips;
      engine_blip = std::max({engine_blip, e_prefill, e_decode});
      EXPECT_LE(e_prefill, kEngineBlipTolerance * scale) << name << " row " << row << " pos " << t;
      EXPECT_LE(e_decode, kEngineBlipTolerance * scale) << name << " row " << row << " pos " << t;
      continue;
    }
    worst_prefill = std::max(worst_prefill, e_prefill);
    worst_decode = std::max(worst_decode, e_decode);
    EXPECT_LE(e_prefill, limit) << name << " row " << row << " prefill, pos " << t;
    EXPECT_LE(e_decode, limit) << name << " row " << row << " decode, pos " << t;
  }
  std::printf(
      "%s row %d (scale %.3f): max |err| / scale over %lld positions: prefill vs cached_full "
      "%.3g, decode vs incremental %.3g\n",
      name, row, scale,
      static_cast<long long>(T - static_cast<int64_t>(split.size()) - engine_blips),
      worst_prefill / scale, worst_decode / scale);
  if (!split.empty())
    std::printf(
        "  left out: %zu positions (%lld..%lld) where transformers' cached paths disagree; "
        "there ours follows cached_full at %lld, incremental at %lld\n",
        split.size(), static_cast<long long>(split.front()), static_cast<long long>(split.back()),
        static_cast<long long>(match_cached), static_cast<long long>(match_incremental));
  if (engine_blips > 0)
    std::printf("  engine-side blips: %lld positions, max |err| / scale %.3g\n",
                static_cast<long long>(engine_blips), engine_blip / scale);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V41Golden,
                         ::testing::Combine(::testing::ValuesIn(testing::kFixtures),
                                            ::testing::Values(0, 1)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_row" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace deepinfer::v41

// cpu::dot / linear / grouped_linear against sums done here in double precision, and (sanitizer
// builds) the once-per-call range checks that stand in for ASan's per-element ones.
#include "deepinfer/backend/cpu/cpu_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "deepinfer/base/sanitized_build.h"

namespace deepinfer::cpu {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

double exact_dot(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t k = 0; k < n; ++k) s += double(a[k]) * b[k];
  return s;
}

TEST(CpuOps, DotCoversEveryLengthAroundItsEightWideBlocks) {
  const auto a = random_floats(40, 1), b = random_floats(40, 2);
  for (int64_t n = 0; n <= 40; ++n)
    EXPECT_NEAR(dot(a.data(), b.data(), n), exact_dot(a.data(), b.data(), n), 1e-5) << "n " << n;
}

TEST(CpuOps, LinearAndGroupedLinearGiveEveryRowsSums) {
  // Large enough (out * n * in >= 2^15) to run on the thread pool.
  const int64_t out = 96, in = 200, n = 5, groups = 4;
  const auto w = random_floats(out * in, 3), x = random_floats(n * in, 4);
  std::vector<float> y(n * out, NAN);
  linear_fp32(w.data(), out, in, x.data(), n, y.data());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t o = 0; o < out; ++o)
      ASSERT_NEAR(y[t * out + o], exact_dot(w.data() + o * in, x.data() + t * in, in), 1e-4)
          << "t " << t << " o " << o;
  // Grouped: row o of W sees only slice o / (out / groups) of each input row.
  const int64_t opg = out / groups, ipg = in / groups;
  std::fill(y.begin(), y.end(), NAN);
  grouped_linear(w.data(), groups, opg, ipg, x.data(), n, y.data());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t o = 0; o < out; ++o)
      ASSERT_NEAR(y[t * out + o],
                  exact_dot(w.data() + o * ipg, x.data() + t * in + (o / opg) * ipg, ipg), 1e-4)
          << "t " << t << " o " << o;
}

#ifdef DEEPINFER_ASAN
TEST(CpuOpsUnderAsan, AnOperandShorterThanItsShapeIsReported) {
  const int64_t out = 64, in = 128, n = 4;
  const auto w = random_floats(out * in, 5);
  auto x = std::make_unique<float[]>(n * in - 1);  // one float short
  std::vector<float> y(n * out);
  EXPECT_DEATH(linear_fp32(w.data(), out, in, x.get(), n, y.data()), "heap-buffer-overflow");
  EXPECT_DEATH((void)dot(w.data(), x.get() + (n - 1) * in, in), "heap-buffer-overflow");
}
#endif

}  // namespace
}  // namespace deepinfer::cpu

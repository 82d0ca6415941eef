// Shared by the CUDA op conformance tests: fresh random inputs (the seed is printed so a failure
// can be replayed with DEEPINFER_TEST_SEED), and a relative error in which NaN never passes.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "deepinfer/tensor/dtype.h"

namespace deepinfer::cuda::testing {

inline uint32_t test_seed() {
  static const uint32_t seed = [] {
    const char* env = std::getenv("DEEPINFER_TEST_SEED");
    const uint32_t s =
        env ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10)) : std::random_device{}();
    std::printf("DEEPINFER_TEST_SEED=%u\n", s);
    return s;
  }();
  return seed;
}

inline std::mt19937& rng() {
  static std::mt19937 r(test_seed());
  return r;
}

inline std::vector<float> randn(size_t n, float stddev = 1.0f) {
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng());
  return v;
}

inline std::vector<float> round_bf16(std::vector<float> v) {
  for (auto& x : v) x = round_to_bf16(x);
  return v;
}

inline std::vector<uint16_t> bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = float_to_bf16(v[i]);
  return b;
}

// ||got - want|| / ||want|| in double; infinity when got has a non-finite value or sizes differ.
inline double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    const double d = double(got[i]) - want[i];
    num += d * d;
    den += double(want[i]) * want[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// Prints the error so the log carries the figure, then checks it (NaN or size mismatch fails).
inline ::testing::AssertionResult close(const std::vector<float>& got,
                                        const std::vector<float>& want, double tol) {
  const double e = rel_err(got, want);
  std::printf("    rel err %.3g (tol %.0e, %zu values)\n", e, tol, want.size());
  if (e < tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "rel err " << e << " >= " << tol;
}

// Tolerances (‖got − ref‖ / ‖ref‖), per operand type (DESIGN.md, Numerics):
inline constexpr double kF32Tol = 1e-5;   // fp32 math, only the summation order differs
inline constexpr double kBf16Tol = 2e-2;  // bf16-rounded activations against an fp32 reference

}  // namespace deepinfer::cuda::testing

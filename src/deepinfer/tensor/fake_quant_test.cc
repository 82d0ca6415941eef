#include "deepinfer/tensor/fake_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace deepinfer {
namespace {

// Each expected value below is worked out by hand in the comment beside it.

TEST(FakeQuantFp8, AmaxAt448KeepsScaleOne) {
  // s = 2^ceil(log2(448/448)) = 1. 1.0625 ties to 1.0; 0.001 = 0.512 * 2^-9 -> 1 subnormal unit.
  std::vector<float> x = {448.0f, 1.0625f, -0.001f, 3.0f};
  fake_quant_fp8_blocks(x.data(), 4, 4);
  EXPECT_EQ(x, (std::vector<float>{448.0f, 1.0f, -0.001953125f, 3.0f}));
}

TEST(FakeQuantFp8, ScaleIsTheNextPowerOfTwo) {
  // amax 1: 1/448 = 2^-8.8 -> s = 2^-8. 0.3 * 256 = 76.8, grid step 8 in [64,128) -> 80.
  std::vector<float> x = {1.0f, 0.3f};
  fake_quant_fp8_blocks(x.data(), 2, 2);
  EXPECT_EQ(x, (std::vector<float>{1.0f, 0.3125f}));
  // amax 1000: 1000/448 = 2.23 -> s = 4. 250 -> step 16 in [128,256) -> 256 -> 1024.
  // 0.01 / 4 = 0.0025 = 1.28 * 2^-9 -> 1 unit -> 2^-9 * 4 = 2^-7.
  std::vector<float> y = {1000.0f, 0.01f};
  fake_quant_fp8_blocks(y.data(), 2, 2);
  EXPECT_EQ(y, (std::vector<float>{1024.0f, 0.0078125f}));
  // amax exactly 896 = 448 * 2: s = 2, 3/2 = 1.5 exact.
  std::vector<float> z = {-896.0f, 3.0f};
  fake_quant_fp8_blocks(z.data(), 2, 2);
  EXPECT_EQ(z, (std::vector<float>{-896.0f, 3.0f}));
}

TEST(FakeQuantFp8, AmaxFloorOf1e4) {
  // amax 1e-6 floors to 1e-4: 1e-4/448 = 2^-22.1 -> s = 2^-22.
  // 1e-6 * 2^22 = 4.19 -> 4 -> 2^-20. 1e-9 * 2^22 = 0.0042 = 2.15 subnormal units -> 2 -> 2^-30.
  // (Without the floor s would be 2^-28 and 1e-9 would become 9 * 2^-33.)
  std::vector<float> x = {1e-6f, 1e-9f};
  fake_quant_fp8_blocks(x.data(), 2, 2);
  EXPECT_EQ(x[0], std::ldexp(1.0f, -20));
  EXPECT_EQ(x[1], std::ldexp(1.0f, -30));
  std::vector<float> zeros(3, 0.0f);
  fake_quant_fp8_blocks(zeros.data(), 3, 2);
  EXPECT_EQ(zeros, std::vector<float>(3, 0.0f));
}

TEST(FakeQuantFp8, BlocksAreIndependentAndTheLastMayBeShort) {
  // Block 1 has amax 1 (s = 2^-8); the short block 2 has amax 1000 (s = 4).
  std::vector<float> x = {1.0f, 0.3f, 1000.0f};
  fake_quant_fp8_blocks(x.data(), 3, 2);
  EXPECT_EQ(x, (std::vector<float>{1.0f, 0.3125f, 1024.0f}));
}

TEST(FakeQuantFp8, InfinityPoisonsItsBlock) {
  std::vector<float> x = {INFINITY, 1.0f, 2.0f, 2.0f};
  fake_quant_fp8_blocks(x.data(), 4, 2);
  EXPECT_TRUE(std::isnan(x[0]));
  EXPECT_TRUE(std::isnan(x[1]));
  EXPECT_EQ(x[2], 2.0f);
}

TEST(FakeQuantFp4, AmaxSixKeepsScaleOne) {
  // s = 1. 2.5 ties to 2 (even code 4); -0.25 ties to -0; 0.75 ties to 1; 5 ties to 4.
  std::vector<float> x = {6.0f, 2.5f, -0.25f, 0.75f, 5.0f};
  fake_quant_fp4_blocks(x.data(), 5, 5);
  EXPECT_EQ(x, (std::vector<float>{6.0f, 2.0f, -0.0f, 1.0f, 4.0f}));
  EXPECT_TRUE(std::signbit(x[2]));
}

TEST(FakeQuantFp4, ScaleChoiceAndGrid) {
  // amax 1: 1/6 = 2^-2.58 -> s = 1/4. 0.3*4 = 1.2 -> 1; -0.7*4 = -2.8 -> -3; 0.0625*4 = 0.25 -> 0.
  std::vector<float> x = {1.0f, 0.3f, -0.7f, 0.0625f};
  fake_quant_fp4_blocks(x.data(), 4, 4);
  EXPECT_EQ(x, (std::vector<float>{1.0f, 0.25f, -0.75f, 0.0f}));
  // amax 7: 7/6 -> s = 2. 3.5 ties to 4 -> 8; 2.5 ties to 2 -> 4; 0.5 -> 1.
  std::vector<float> y = {7.0f, 5.0f, 1.0f};
  fake_quant_fp4_blocks(y.data(), 3, 3);
  EXPECT_EQ(y, (std::vector<float>{8.0f, 4.0f, 1.0f}));
}

TEST(FakeQuantFp4, AmaxFloorOfSixTimesTwoToMinus126) {
  // amax 2^-127 floors to 6 * 2^-126 -> s = 2^-126. 2^-127 / s = 0.5 (kept);
  // 2^-130 / s = 1/16 -> 0. (Without the floor s = 2^-129 and 2^-130 would survive as 0.5 * s.)
  std::vector<float> x = {std::ldexp(1.0f, -127), std::ldexp(1.0f, -130)};
  fake_quant_fp4_blocks(x.data(), 2, 2);
  EXPECT_EQ(x[0], std::ldexp(1.0f, -127));
  EXPECT_EQ(x[1], 0.0f);
}

TEST(FakeQuantFp4, BlocksOf32) {
  // Block 0: amax 6, s = 1; block 1: amax 12, s = 2 so 1.4 / 2 = 0.7 -> 0.5 -> 1.
  std::vector<float> x(64, 0.0f);
  x[0] = 6.0f;
  x[1] = 1.4f;  // s = 1: 1.4 -> 1.5
  x[32] = 12.0f;
  x[33] = 1.4f;
  fake_quant_fp4_blocks(x.data(), 64, 32);
  EXPECT_EQ(x[1], 1.5f);
  EXPECT_EQ(x[32], 12.0f);
  EXPECT_EQ(x[33], 1.0f);
}

TEST(Hadamard, KnownVectorsN4) {
  // H4 (Sylvester) / 2 = [[1,1,1,1],[1,-1,1,-1],[1,1,-1,-1],[1,-1,-1,1]] / 2.
  std::vector<float> e0 = {1, 0, 0, 0};
  hadamard_transform(e0.data(), 4);
  EXPECT_EQ(e0, (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
  std::vector<float> e1 = {0, 1, 0, 0};
  hadamard_transform(e1.data(), 4);
  EXPECT_EQ(e1, (std::vector<float>{0.5f, -0.5f, 0.5f, -0.5f}));
  std::vector<float> e2 = {0, 0, 1, 0};
  hadamard_transform(e2.data(), 4);
  EXPECT_EQ(e2, (std::vector<float>{0.5f, 0.5f, -0.5f, -0.5f}));
  std::vector<float> v = {1, 2, 3, 4};  // [10, -2, -4, 0] / 2
  hadamard_transform(v.data(), 4);
  EXPECT_EQ(v, (std::vector<float>{5.0f, -1.0f, -2.0f, 0.0f}));
  std::vector<float> one = {3.0f};
  hadamard_transform(one.data(), 1);
  EXPECT_EQ(one[0], 3.0f);
}

TEST(Hadamard, N2AndScale) {
  std::vector<float> v = {1.0f, 0.0f};  // [1, 1] / sqrt(2)
  hadamard_transform(v.data(), 2);
  EXPECT_FLOAT_EQ(v[0], 0.70710678f);
  EXPECT_FLOAT_EQ(v[1], 0.70710678f);
}

TEST(Hadamard, OrthogonalAndInvolutoryAt128) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  std::vector<float> x(128), y;
  for (float& v : x) v = dist(rng);
  y = x;
  hadamard_transform(y.data(), 128);
  double nx = 0, ny = 0;
  for (int i = 0; i < 128; ++i) {
    nx += double(x[i]) * x[i];
    ny += double(y[i]) * y[i];
  }
  EXPECT_NEAR(ny, nx, 1e-4 * nx);
  // Row k of H is the Walsh function (-1)^popcount(i & k) / sqrt(128): check one output.
  double y5 = 0;
  for (int i = 0; i < 128; ++i) y5 += (__builtin_popcount(i & 5) % 2 ? -1.0 : 1.0) * x[i];
  EXPECT_NEAR(y[5], y5 / std::sqrt(128.0), 1e-5);
  hadamard_transform(y.data(), 128);  // H is symmetric and orthogonal: H H = I
  for (int i = 0; i < 128; ++i) EXPECT_NEAR(y[i], x[i], 1e-5) << i;
}

TEST(CeilLog2, ExactAtPowersOfTwo) {
  EXPECT_EQ(ceil_log2(1.0f), 0);
  EXPECT_EQ(ceil_log2(std::nextafter(1.0f, 2.0f)), 1);
  EXPECT_EQ(ceil_log2(0.75f), 0);
  EXPECT_EQ(ceil_log2(0.5f), -1);
  EXPECT_EQ(ceil_log2(std::ldexp(1.0f, -149)), -149);
}

}  // namespace
}  // namespace deepinfer

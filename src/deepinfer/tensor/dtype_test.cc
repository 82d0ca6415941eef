#include "deepinfer/tensor/dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

namespace deepinfer {
namespace {

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

TEST(DType, SizesAndNamesRoundTrip) {
  struct Case {
    DType d;
    const char* name;
    size_t size;
  };
  const Case cases[] = {
      {DType::kF32, "F32", 4},        {DType::kBF16, "BF16", 2},      {DType::kF16, "F16", 2},
      {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E8M0, "F8_E8M0", 1}, {DType::kI64, "I64", 8},
      {DType::kI32, "I32", 4},        {DType::kI16, "I16", 2},        {DType::kI8, "I8", 1},
      {DType::kU8, "U8", 1},          {DType::kBool, "BOOL", 1}};
  for (const Case& c : cases) {
    EXPECT_STREQ(dtype_name(c.d), c.name);
    EXPECT_EQ(dtype_size(c.d), c.size) << c.name;
    auto parsed = parse_dtype(c.name);
    ASSERT_TRUE(parsed.ok()) << c.name;
    EXPECT_EQ(*parsed, c.d);
  }
  for (const char* bad : {"F64", "F8_E5M2", "f32", "", "U16"}) {
    auto parsed = parse_dtype(bad);
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(DType, Bf16Decode) {
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xc000), -2.0f);
  EXPECT_EQ(bf16_to_float(0x3fc0), 1.5f);
  EXPECT_EQ(bf16_to_float(0x7f80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(bf16_to_float(0x0001), std::ldexp(1.0f, -133));  // subnormal: 2^-126 * 2^-7
  EXPECT_TRUE(std::isnan(bf16_to_float(0x7fc1)));
}

TEST(DType, Bf16EncodeRoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(-1.5f), 0xbfc0);
  // 1 + 2^-8 lies halfway between 0x3f80 and 0x3f81: ties to the even 0x3f80.
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808000)), 0x3f80);
  // 1 + 3*2^-8 lies halfway between 0x3f81 and 0x3f82: ties to the even 0x3f82.
  EXPECT_EQ(float_to_bf16(from_bits(0x3f818000)), 0x3f82);
  // Just past the halfway point rounds up.
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808001)), 0x3f81);
  EXPECT_EQ(float_to_bf16(from_bits(0x3f807fff)), 0x3f80);
  // The largest float rounds up to infinity.
  EXPECT_EQ(float_to_bf16(from_bits(0x7f7fffff)), 0x7f80);
  // NaN stays NaN, even one whose payload lives only in the dropped low bits.
  EXPECT_EQ(float_to_bf16(from_bits(0x7f800001)), 0x7fc0);
  EXPECT_EQ(float_to_bf16(from_bits(0xffc00000)), 0xffc0);
  EXPECT_EQ(round_to_bf16(from_bits(0x3f818000)), from_bits(0x3f820000));
}

TEST(DType, F16Decode) {
  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(0xc000), -2.0f);
  EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_float(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_to_float(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(f16_to_float(0x3555), 0.333251953125f);  // (1 + 341/1024) / 4
  EXPECT_EQ(f16_to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_float(0x7e00)));
  EXPECT_TRUE(std::signbit(f16_to_float(0x8000)));
}

TEST(DType, F16EncodeRoundsToNearestEven) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);  // halfway to 2^16: ties to even = inf
  EXPECT_EQ(float_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even
  EXPECT_EQ(float_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even 0
  EXPECT_EQ(float_to_f16(std::ldexp(1.5f, -25)), 0x0001);  // 0.75 units
  EXPECT_EQ(float_to_f16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units: tie
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -26)), 0x0000);
  // 1023.5 subnormal units ties to 1024, the smallest normal.
  EXPECT_EQ(float_to_f16(std::ldexp(2047.0f, -25)), 0x0400);
  EXPECT_EQ(float_to_f16(-std::ldexp(1.0f, -14)), 0x8400);
  EXPECT_EQ(float_to_f16(std::nanf("")) & 0x7c00, 0x7c00);
  EXPECT_NE(float_to_f16(std::nanf("")) & 0x03ff, 0);
}

TEST(DType, Fp8E4M3Decode) {
  EXPECT_EQ(fp8e4m3_to_float(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(fp8e4m3_to_float(0x80)));
  EXPECT_EQ(fp8e4m3_to_float(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fp8e4m3_to_float(0x07), std::ldexp(7.0f, -9));  // largest subnormal
  EXPECT_EQ(fp8e4m3_to_float(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(fp8e4m3_to_float(0x38), 1.0f);                  // e=7, m=0
  EXPECT_EQ(fp8e4m3_to_float(0x3c), 1.5f);                  // e=7, m=4
  EXPECT_EQ(fp8e4m3_to_float(0xb8), -1.0f);
  EXPECT_EQ(fp8e4m3_to_float(0x77), 240.0f);  // 1.875 * 2^7
  EXPECT_EQ(fp8e4m3_to_float(0x78), 256.0f);  // e=15, m=0 is a number in FN
  EXPECT_EQ(fp8e4m3_to_float(0x7d), 416.0f);  // 1.625 * 2^8
  EXPECT_EQ(fp8e4m3_to_float(0x7e), 448.0f);  // max
  EXPECT_EQ(fp8e4m3_to_float(0xfe), -448.0f);
  EXPECT_TRUE(std::isnan(fp8e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(fp8e4m3_to_float(0xff)));
}

TEST(DType, Fp8E4M3EncodeRoundsAndSaturates) {
  EXPECT_EQ(float_to_fp8e4m3(1.0f), 0x38);
  EXPECT_EQ(float_to_fp8e4m3(-1.5f), 0xbc);
  EXPECT_EQ(float_to_fp8e4m3(448.0f), 0x7e);
  EXPECT_EQ(float_to_fp8e4m3(449.0f), 0x7e);
  EXPECT_EQ(float_to_fp8e4m3(1e9f), 0x7e);
  EXPECT_EQ(float_to_fp8e4m3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(float_to_fp8e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(float_to_fp8e4m3(std::nanf("")), 0x7f);
  // Ties to even mantissa: 1 + 1/16 is between 1 (m=0) and 1.125 (m=1).
  EXPECT_EQ(float_to_fp8e4m3(1.0625f), 0x38);
  EXPECT_EQ(float_to_fp8e4m3(1.1875f), 0x3a);  // between m=1 and m=2
  EXPECT_EQ(float_to_fp8e4m3(1.07f), 0x39);
  EXPECT_EQ(float_to_fp8e4m3(432.0f), 0x7e);   // between 416 (m=5) and 448 (m=6)
  EXPECT_EQ(float_to_fp8e4m3(1.9375f), 0x40);  // between 1.875 and 2.0: carries into e=8
  // Subnormals: units of 2^-9.
  EXPECT_EQ(float_to_fp8e4m3(std::ldexp(1.0f, -10)), 0x00);   // 0.5 units: tie -> 0
  EXPECT_EQ(float_to_fp8e4m3(std::ldexp(3.0f, -10)), 0x02);   // 1.5 units: tie -> 2
  EXPECT_EQ(float_to_fp8e4m3(std::ldexp(15.0f, -10)), 0x08);  // 7.5 units -> smallest normal
  EXPECT_EQ(float_to_fp8e4m3(-std::ldexp(1.0f, -12)), 0x80);
  // Every finite code survives decode -> encode.
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    EXPECT_EQ(float_to_fp8e4m3(fp8e4m3_to_float(static_cast<uint8_t>(c))), c) << c;
  }
}

TEST(DType, E8M0) {
  EXPECT_EQ(e8m0_to_float(127), 1.0f);
  EXPECT_EQ(e8m0_to_float(128), 2.0f);
  EXPECT_EQ(e8m0_to_float(120), 1.0f / 128);
  EXPECT_EQ(e8m0_to_float(254), std::ldexp(1.0f, 127));
  EXPECT_EQ(bits(e8m0_to_float(0)), 0x00400000u);  // 2^-127, a float subnormal
  EXPECT_TRUE(std::isnan(e8m0_to_float(255)));
  EXPECT_EQ(float_to_e8m0_pow2(1.0f), 127);
  EXPECT_EQ(float_to_e8m0_pow2(0.5f), 126);
  EXPECT_EQ(float_to_e8m0_pow2(std::ldexp(1.0f, -127)), 0);
  EXPECT_EQ(float_to_e8m0_pow2(std::ldexp(1.0f, 127)), 254);
  EXPECT_EQ(float_to_e8m0_pow2(3.0f), 129);  // not a power of two: rounds up to 4
  EXPECT_EQ(float_to_e8m0_pow2(0.0f), 255);
  EXPECT_EQ(float_to_e8m0_pow2(-1.0f), 255);
  EXPECT_EQ(float_to_e8m0_pow2(std::nanf("")), 255);
}

TEST(DType, Fp4E2M1DecodesAllSixteenCodes) {
  const float want[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(fp4e2m1_to_float(static_cast<uint8_t>(c)), want[c]) << c;
    EXPECT_EQ(std::signbit(fp4e2m1_to_float(static_cast<uint8_t>(c))), c >= 8) << c;
    EXPECT_EQ(float_to_fp4e2m1(want[c]), c) << c;
  }
  EXPECT_EQ(fp4e2m1_to_float(0xf3), 1.5f);  // high bits ignored
}

TEST(DType, Fp4E2M1EncodeTiesToEvenCodeAndClamps) {
  EXPECT_EQ(float_to_fp4e2m1(0.25f), 0x0);  // 0 | 0.5  -> code 0
  EXPECT_EQ(float_to_fp4e2m1(0.26f), 0x1);
  EXPECT_EQ(float_to_fp4e2m1(0.75f), 0x2);  // 0.5 | 1  -> code 2
  EXPECT_EQ(float_to_fp4e2m1(1.25f), 0x2);  // 1 | 1.5  -> code 2
  EXPECT_EQ(float_to_fp4e2m1(1.75f), 0x4);  // 1.5 | 2  -> code 4
  EXPECT_EQ(float_to_fp4e2m1(2.5f), 0x4);   // 2 | 3    -> code 4
  EXPECT_EQ(float_to_fp4e2m1(3.5f), 0x6);   // 3 | 4    -> code 6
  EXPECT_EQ(float_to_fp4e2m1(5.0f), 0x6);   // 4 | 6    -> code 6
  EXPECT_EQ(float_to_fp4e2m1(5.01f), 0x7);
  EXPECT_EQ(float_to_fp4e2m1(2.9f), 0x5);
  EXPECT_EQ(float_to_fp4e2m1(7.0f), 0x7);  // clamp
  EXPECT_EQ(float_to_fp4e2m1(1e30f), 0x7);
  EXPECT_EQ(float_to_fp4e2m1(-100.0f), 0xf);
  EXPECT_EQ(float_to_fp4e2m1(-3.5f), 0xe);
  EXPECT_EQ(float_to_fp4e2m1(-0.3f), 0x9);
  EXPECT_EQ(float_to_fp4e2m1(-0.1f), 0x8);
}

}  // namespace
}  // namespace deepinfer

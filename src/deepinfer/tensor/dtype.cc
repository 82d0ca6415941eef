#include "deepinfer/tensor/dtype.h"

#include <bit>
#include <cmath>
#include <string>

namespace deepinfer {
namespace {

struct DTypeEntry {
  DType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::kF32, "F32", 4},        {DType::kBF16, "BF16", 2},      {DType::kF16, "F16", 2},
    {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E8M0, "F8_E8M0", 1}, {DType::kI64, "I64", 8},
    {DType::kI32, "I32", 4},        {DType::kI16, "I16", 2},        {DType::kI8, "I8", 1},
    {DType::kU8, "U8", 1},          {DType::kBool, "BOOL", 1},
};

const DTypeEntry& entry(DType dtype) { return kDTypes[static_cast<int>(dtype)]; }

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
float float_of(uint32_t b) { return std::bit_cast<float>(b); }

}  // namespace

size_t dtype_size(DType dtype) { return entry(dtype).size; }
const char* dtype_name(DType dtype) { return entry(dtype).name; }

StatusOr<DType> parse_dtype(std::string_view name) {
  for (const DTypeEntry& e : kDTypes) {
    if (name == e.name) return e.dtype;
  }
  return invalid_argument("unknown dtype '" + std::string(name) + "'");
}

float bf16_to_float(uint16_t bits) { return float_of(static_cast<uint32_t>(bits) << 16); }

uint16_t float_to_bf16(float x) {
  uint32_t b = bits_of(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x0040u);
  b += 0x7fffu + ((b >> 16) & 1u);  // RNE; carries into the exponent (and to inf) correctly
  return static_cast<uint16_t>(b >> 16);
}

float round_to_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return float_of(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    // Subnormal: mant * 2^-24, exact in fp32.
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return float_of(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t float_to_f16(float x) {
  const uint32_t b = bits_of(x);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const uint32_t abs = b & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;
  const int e = static_cast<int>(abs >> 23) - 127;
  if (e > 15) return sign | 0x7c00u;
  uint32_t mant = abs & 0x7fffffu;
  if (e >= -14) {
    uint32_t h = (static_cast<uint32_t>(e + 15) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry to 0x7c00 (inf)
    return static_cast<uint16_t>(sign | h);
  }
  if (e < -25) return sign;
  mant |= 0x800000u;           // value = mant * 2^(e-23); subnormal unit 2^-24
  const int shift = -(e + 1);  // 14..24
  uint32_t h = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (h & 1u))) ++h;  // may become the smallest normal, correctly
  return static_cast<uint16_t>(sign | h);
}

float fp8e4m3_to_float(uint8_t bits) {
  const bool neg = bits & 0x80u;
  const int exp = (bits >> 3) & 0xf;
  const int mant = bits & 0x7;
  float v;
  if (exp == 0xf && mant == 0x7) {
    v = std::nanf("");
  } else if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -9);
  } else {
    v = std::ldexp(static_cast<float>(8 + mant), exp - 10);  // (1 + m/8) * 2^(e-7)
  }
  return neg ? -v : v;
}

uint8_t float_to_fp8e4m3(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0x1p-6f) {
    // Subnormals (and the smallest normal, code 8, reached by rounding up): code = a / 2^-9.
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  int e2;
  const float f = std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1)
  const int exp = e2 - 1;              // a = (2f) * 2^exp, exp in [-6, 8]
  const int mant = static_cast<int>(std::nearbyint((2.0f * f - 1.0f) * 8.0f));  // exact, RNE
  // mant == 8 carries into the exponent; a < 448 keeps the result <= 0x7e.
  return sign | static_cast<uint8_t>(((exp + 7) << 3) + mant);
}

float e8m0_to_float(uint8_t bits) {
  if (bits == 0xff) return std::nanf("");
  return std::ldexp(1.0f, static_cast<int>(bits) - 127);
}

uint8_t float_to_e8m0_pow2(float x) {
  if (!(x > 0.0f) || std::isinf(x)) return 0xff;
  int e2;
  const float f = std::frexp(x, &e2);   // x = f * 2^e2, f in [0.5, 1)
  int exp = (f == 0.5f) ? e2 - 1 : e2;  // ceil(log2(x))
  if (exp < -127) exp = -127;
  if (exp > 127) exp = 127;
  return static_cast<uint8_t>(exp + 127);
}

namespace {
constexpr float kE2M1Values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
}  // namespace

float fp4e2m1_to_float(uint8_t nibble) {
  const float v = kE2M1Values[nibble & 0x7];
  return (nibble & 0x8) ? -v : v;
}

uint8_t float_to_fp4e2m1(float x) {
  if (std::isnan(x)) return 0x0;
  const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const float a = std::fabs(x);
  // Midpoints between consecutive grid values; at a midpoint the even code wins.
  constexpr float kMid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  uint8_t code = 0;
  while (code < 7) {
    const float m = kMid[code];
    // Moving from `code` to `code + 1`: at the tie go up only if code + 1 is even.
    const bool up = ((code + 1) % 2 == 0) ? (a >= m) : (a > m);
    if (!up) break;
    ++code;
  }
  return sign | code;
}

}  // namespace deepinfer

#include "deepinfer/tensor/fake_quant.h"

#include <algorithm>
#include <cmath>

#include "deepinfer/base/check.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer {
namespace {

float block_amax(const float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

// An infinite amax makes the reference's scale infinite, and every element x/s*s NaN.
bool poison_if_inf(float* p, int64_t len, float amax) {
  if (std::isfinite(amax)) return false;
  std::fill(p, p + len, std::nanf(""));
  return true;
}

}  // namespace

int ceil_log2(float v) {
  int e2;
  const float f = std::frexp(v, &e2);  // v = f * 2^e2, f in [0.5, 1)
  return f == 0.5f ? e2 - 1 : e2;
}

void fake_quant_fp8_blocks(float* x, int64_t n, int block) {
  DI_CHECK(block > 0);
  for (int64_t b = 0; b < n; b += block) {
    const int64_t len = std::min<int64_t>(block, n - b);
    float* p = x + b;
    const float amax = std::max(block_amax(p, len), 1e-4f);
    if (poison_if_inf(p, len, amax)) continue;
    // The reference computes ceil_log2(amax * fp32(1/448)); for every float amax that gives the
    // same exponent as amax / 448 (checked exhaustively; likewise for 1/6 below).
    // Power-of-two scale: dividing and multiplying by it is exact.
    const int e = ceil_log2(amax / 448.0f);
    for (int64_t i = 0; i < len; ++i) {
      const float q = fp8e4m3_to_float(float_to_fp8e4m3(std::ldexp(p[i], -e)));
      p[i] = std::ldexp(q, e);
    }
  }
}

void fake_quant_fp4_blocks(float* x, int64_t n, int block) {
  DI_CHECK(block > 0);
  for (int64_t b = 0; b < n; b += block) {
    const int64_t len = std::min<int64_t>(block, n - b);
    float* p = x + b;
    const float amax = std::max(block_amax(p, len), 6.0f * 0x1p-126f);
    if (poison_if_inf(p, len, amax)) continue;
    const int e = ceil_log2(amax / 6.0f);
    for (int64_t i = 0; i < len; ++i) {
      const float v = std::clamp(std::ldexp(p[i], -e), -6.0f, 6.0f);
      p[i] = std::ldexp(fp4e2m1_to_float(float_to_fp4e2m1(v)), e);
    }
  }
}

void hadamard_transform(float* x, int n) {
  DI_CHECK(n > 0 && (n & (n - 1)) == 0);
  for (int h = 1; h < n; h *= 2) {
    for (int i = 0; i < n; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        const float a = x[j];
        const float b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)));
  for (int i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace deepinfer

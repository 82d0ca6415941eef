#include "deepinfer/model/deepseek_v41/qat.h"

#include <algorithm>
#include <cmath>

#include "deepinfer/tensor/dtype.h"
#include "deepinfer/tensor/fake_quant.h"

namespace deepinfer::v41 {
namespace {

constexpr int kWindowBlock = 32;
constexpr int kCompressedBlock = 16;
constexpr int kIndexerBlock = 32;

}  // namespace

void quantize_window_kv(float* x, int64_t n) {
  if (n % kWindowBlock == 0) fake_quant_fp8_blocks(x, n, kWindowBlock);
}

void quantize_compressed_kv(float* x, int64_t n) {
  if (n % kCompressedBlock) return;
  for (int64_t b = 0; b < n; b += kCompressedBlock) {
    float* p = x + b;
    float amax = 0.0f;
    for (int i = 0; i < kCompressedBlock; ++i) amax = std::max(amax, std::fabs(p[i]));
    const float s = fp8e4m3_to_float(float_to_fp8e4m3(std::max(amax, 6.0f * 0x1p-9f) / 6.0f));
    for (int i = 0; i < kCompressedBlock; ++i) {
      const float q = std::clamp(p[i] / s, -6.0f, 6.0f);
      p[i] = fp4e2m1_to_float(float_to_fp4e2m1(q)) * s;
    }
  }
}

void quantize_indexer(float* x, int64_t n) {
  if (n % kIndexerBlock == 0) fake_quant_fp4_blocks(x, n, kIndexerBlock);
}

}  // namespace deepinfer::v41

// The fast MXFP4 packing against the plain definition (divide by the block's power-of-two scale,
// float_to_fp4e2m1): equal bytes, so the small presets' stored values do not move.
#include "deepinfer/model/deepseek_v4/random_tensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "deepinfer/tensor/dtype.h"

namespace deepinfer::v4 {
namespace {

TEST(RandomTensors, Mxfp4PackingEqualsThePlainDefinition) {
  const int64_t rows = 8, cols = 256;
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(rows * cols);
  for (float& x : v) x = normal(rng);
  // Exact ties of the FP4 grid (midpoints times the block's scale), zeros of both signs.
  const float mids[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  for (int i = 0; i < 7; ++i) {
    v[i] = mids[i], v[32 + i] = -mids[i];  // blocks with amax 5.0: scale 1
  }
  v[0 + 31] = 6.0f, v[32 + 31] = 6.0f;
  v[64] = 0.0f, v[65] = -0.0f;

  std::vector<TensorRecord> out;
  add_mxfp4(out, "w.weight", v, rows, cols);
  ASSERT_EQ(out.size(), 2u);
  const std::vector<uint8_t>& q = out[0].bytes;
  const std::vector<uint8_t>& s = out[1].bytes;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float scale = e8m0_to_float(s[r * (cols / 32) + c / 32]);
      float amax = 0;
      for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(v[r * cols + c / 32 * 32 + k]));
      ASSERT_LE(amax / scale, 6.0f);  // the scale maps the block into FP4's range
      const uint8_t byte = q[r * (cols / 2) + c / 2];
      const uint8_t nibble = c % 2 ? byte >> 4 : byte & 0xF;
      ASSERT_EQ(nibble, float_to_fp4e2m1(v[r * cols + c] / scale)) << r << "," << c;
    }
}

}  // namespace
}  // namespace deepinfer::v4

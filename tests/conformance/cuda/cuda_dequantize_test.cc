// Device dequantization against the loader's host dequantizers (loader/dequantize.h) on fresh
// random stored bytes: every bf16 result must be the host's fp32 value rounded to bf16, bit for
// bit, at ragged shapes and at V4-Flash's (an attention wq_b block, a routed expert's w1).
#include <gtest/gtest.h>

#include <algorithm>

#include "cuda_test_util.h"
#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/quant/dequantize.h"
#include "deepinfer/loader/dequantize.h"

namespace deepinfer::cuda {
namespace {

using namespace deepinfer::cuda::testing;

std::vector<uint8_t> random_bytes(size_t n, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(d(rng()));
  return v;
}

TensorInfo view(const std::string& name, DType dtype, std::vector<int64_t> shape,
                const std::vector<uint8_t>& bytes) {
  TensorInfo t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = bytes.data();
  t.nbytes = bytes.size();
  t.file = "test";
  return t;
}

// Number of elements whose bits differ; the first few are printed.
size_t mismatches(const std::vector<uint16_t>& got, const std::vector<float>& want_f32) {
  size_t bad = 0;
  for (size_t i = 0; i < want_f32.size(); ++i) {
    if (got[i] == float_to_bf16(want_f32[i])) continue;
    if (bad++ < 5)
      std::printf("    element %zu: got 0x%04x, want 0x%04x (%g)\n", i, got[i],
                  float_to_bf16(want_f32[i]), want_f32[i]);
  }
  return bad;
}

TEST(CudaDequantize, Fp8BlockEqualsHostBitForBit) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{300, 260}, {1, 7}, {32768, 1024}}) {
    // E4M3 codes 0x7f and 0xff are NaN: weights never hold them.
    std::vector<uint8_t> w = random_bytes(rows * cols, 0, 0x7e);
    const std::vector<uint8_t> sign = random_bytes(rows * cols, 0, 1);
    for (size_t i = 0; i < w.size(); ++i) w[i] |= sign[i] << 7;
    const int64_t sr = (rows + 127) / 128, sc = (cols + 127) / 128;
    const std::vector<uint8_t> s = random_bytes(sr * sc, 110, 140);  // E8M0 around 2^0
    const TensorInfo tw = view("w", DType::kF8E4M3, {rows, cols}, w);
    const TensorInfo ts = view("w.scale", DType::kF8E8M0, {sr, sc}, s);
    std::vector<float> want(rows * cols), scale;
    ASSERT_TRUE(dequantize_fp8_block(tw, ts, 128, 128, want.data()).ok());
    ASSERT_TRUE(scales_to_float(ts, &scale).ok());
    DeviceBuffer<uint8_t> dw(w);
    DeviceBuffer<float> dscale(scale);
    DeviceBuffer<uint16_t> out(rows * cols);
    out.poison();
    fp8_block_to_bf16(dw.get(), dscale.get(), rows, cols, 128, 128,
                      reinterpret_cast<__nv_bfloat16*>(out.get()), nullptr);
    EXPECT_EQ(mismatches(out.download(), want), 0u) << rows << "x" << cols;
  }
}

TEST(CudaDequantize, Mxfp4EqualsHostBitForBit) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 96}, {3, 40}, {2048, 4096}}) {
    const std::vector<uint8_t> w = random_bytes(rows * cols / 2, 0, 255);
    const int64_t sc = (cols + 31) / 32;
    const std::vector<uint8_t> s = random_bytes(rows * sc, 100, 150);
    const TensorInfo tw = view("w", DType::kI8, {rows, cols / 2}, w);
    const TensorInfo ts = view("w.scale", DType::kF8E8M0, {rows, sc}, s);
    std::vector<float> want(rows * cols);
    ASSERT_TRUE(dequantize_mxfp4(tw, ts, want.data()).ok());
    DeviceBuffer<uint8_t> dw(w), ds(s);
    DeviceBuffer<uint16_t> out(rows * cols);
    out.poison();
    mxfp4_to_bf16(dw.get(), ds.get(), rows, cols, reinterpret_cast<__nv_bfloat16*>(out.get()),
                  nullptr);
    EXPECT_EQ(mismatches(out.download(), want), 0u) << rows << "x" << cols;
  }
}

}  // namespace
}  // namespace deepinfer::cuda

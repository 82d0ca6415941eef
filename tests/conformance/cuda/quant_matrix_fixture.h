// A random projection stored the way checkpoints store it (bf16, FP8 E4M3 with E8M0 block scales,
// MXFP4), for op tests: uploaded as a DeviceMatrix, and dequantized on the host by the loader
// (loader/dequantize.h), which is the CPU reference's view of the same weight.
#pragma once

#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/quant/device_matrix.h"
#include "deepinfer/loader/dequantize.h"
#include "deepinfer/model/deepseek_v4/random_tensors.h"

namespace deepinfer::cuda::testing {

struct QuantMatrix {
  std::vector<float> values;  // [rows, cols] as the host dequantizes them
  DeviceBuffer<uint8_t> data, mx_scale;
  DeviceBuffer<float> block_scale;
  DeviceMatrix m;
};

inline TensorInfo record_view(const TensorRecord& r) {
  TensorInfo t;
  t.name = r.name;
  t.dtype = r.dtype;
  t.shape = r.shape;
  t.data = r.bytes.data();
  t.nbytes = r.bytes.size();
  t.file = "test";
  return t;
}

// Values ~ N(0, stddev^2), quantized to format f (blocks of br x bc for FP8).
inline QuantMatrix make_quant_matrix(MatrixFormat f, int64_t rows, int64_t cols, float stddev,
                                     int br = 128, int bc = 128) {
  QuantMatrix q;
  const std::vector<float> v = randn(rows * cols, stddev);
  q.m.format = f;
  q.m.rows = rows;
  q.m.cols = cols;
  q.values.resize(rows * cols);
  if (f == MatrixFormat::kBf16) {
    q.values = round_bf16(v);
    const std::vector<uint16_t> bits = bf16_bits(q.values);
    q.data = DeviceBuffer<uint8_t>(bits.size() * 2);
    DI_CUDA_CHECK(cudaMemcpy(q.data.get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  } else {
    std::vector<TensorRecord> recs;
    if (f == MatrixFormat::kFp8Block)
      v4::add_fp8(recs, "w.weight", v, rows, cols, br, bc);
    else
      v4::add_mxfp4(recs, "w.weight", v, rows, cols);
    const TensorInfo tw = record_view(recs[0]), ts = record_view(recs[1]);
    q.data = DeviceBuffer<uint8_t>(recs[0].bytes);
    if (f == MatrixFormat::kFp8Block) {
      EXPECT_TRUE(dequantize_fp8_block(tw, ts, br, bc, q.values.data()).ok());
      std::vector<float> s;
      EXPECT_TRUE(scales_to_float(ts, &s).ok());
      q.block_scale = DeviceBuffer<float>(s);
      q.m.block_scale = q.block_scale.get();
      q.m.block_rows = br;
      q.m.block_cols = bc;
      q.m.pow2_scales = powers_of_two(s.data(), s.size());
    } else {
      EXPECT_TRUE(dequantize_mxfp4(tw, ts, q.values.data()).ok());
      q.mx_scale = DeviceBuffer<uint8_t>(recs[1].bytes);
      q.m.mx_scale = q.mx_scale.get();
    }
  }
  q.m.data = q.data.get();
  return q;
}

inline const char* format_name(MatrixFormat f) {
  return f == MatrixFormat::kBf16 ? "bf16" : f == MatrixFormat::kFp8Block ? "fp8" : "mxfp4";
}

}  // namespace deepinfer::cuda::testing

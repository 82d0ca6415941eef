// Projections over weights in their stored formats (backend/cuda/gemm/linear.h) against the CPU
// reference on the host-dequantized weight: weight_gemv for few rows (the decode path), fp8_mma
// for FP8 up to Linear::kMmaMaxRows (one and two 64-row passes, K split over the grid for the
// narrow ones, ragged columns) and the dequantize-then-cuBLASLt path for more (weight_gemv at 1,
// 2, 3 and 8+ rows: each its own rows per pass and columns per warp), for FP8 block-scaled,
// MXFP4 and bf16 weights, at
// V4-Flash shapes, ragged ones, and a row slice of FP8 that starts inside a scale block (wo_a's
// groups in small models). The weights are exact in bf16 and both sides multiply the same bf16
// activations, so only the fp32 summation order differs: the fp32 tolerance.
#include <gtest/gtest.h>

#include "cuda_test_util.h"
#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/gemm/fp8_mma.h"
#include "deepinfer/backend/cuda/gemm/gemm.h"
#include "deepinfer/backend/cuda/gemm/linear.h"
#include "deepinfer/backend/cuda/gemm/weight_gemv.h"
#include "quant_matrix_fixture.h"

namespace deepinfer::cuda {
namespace {

using namespace deepinfer::cuda::testing;

// y = x W^T on the host, over rows [r0, r0 + rows) of the weight.
std::vector<float> host_linear(const std::vector<float>& w, int64_t cols, int64_t r0, int64_t rows,
                               const std::vector<float>& x, int64_t n) {
  std::vector<float> y(n * rows);
  cpu::linear(w.data() + r0 * cols, rows, cols, x.data(), n, y.data());
  return y;
}

struct LinearCase {
  MatrixFormat format;
  int64_t out, in;
};

TEST(CudaLinear, StoredFormatsMatchTheHostDequantizedWeight) {
  Gemm gemm;
  Linear linear(gemm);
  const MatrixFormat kFp8 = MatrixFormat::kFp8Block, kMx = MatrixFormat::kMxfp4,
                     kBf = MatrixFormat::kBf16;
  // wq_a, wq_b, an expert's w1 and w2, the indexer's wq_b, a ragged FP8 one (rows and columns not
  // multiples of the block; columns not of 16, so even few rows take the dequantize path).
  for (LinearCase k : {LinearCase{kFp8, 1024, 4096},
                       {kFp8, 32768, 1024},
                       {kMx, 2048, 4096},
                       {kMx, 4096, 2048},
                       {kFp8, 8192, 1024},
                       {kBf, 300, 256},
                       // the compressor's wkv and the indexer's weights_proj (bf16, weight_gemv
                       // at decode)
                       {kBf, 1024, 4096},
                       {kBf, 64, 4096},
                       {kFp8, 300, 200},
                       // odd rows: weight_gemv's two-columns-a-warp form does not apply
                       {kFp8, 301, 256},
                       {kFp8, 77, 48},
                       {kMx, 96, 64}}) {
    QuantMatrix q = make_quant_matrix(k.format, k.out, k.in, 1.0f / std::sqrt(float(k.in)));
    linear.reserve(k.out * k.in);
    for (int64_t n : {1, 2, 3, 8, 16, 17, 40, 64, 100, 256, 300}) {
      const auto x = round_bf16(randn(n * k.in));
      const std::vector<float> want = host_linear(q.values, k.in, 0, k.out, x, n);
      DeviceBuffer<uint16_t> dx(bf16_bits(x));
      DeviceBuffer<float> dy(n * k.out);
      dy.poison();
      linear.run(q.m, reinterpret_cast<const __nv_bfloat16*>(dx.get()), dy.get(), n, nullptr);
      const bool gemv = linear.takes_gemv(q.m, reinterpret_cast<const __nv_bfloat16*>(dx.get()), n);
      const bool mma = !gemv && n <= Linear::kMmaMaxRows && fp8_mma_supports(q.m);
      EXPECT_TRUE(close(dy.download(), want, kF32Tol))
          << format_name(k.format) << " " << k.out << "x" << k.in << ", " << n << " rows ("
          << (gemv  ? "weight_gemv"
              : mma ? "fp8_mma"
                    : "dequantize + cuBLASLt")
          << ")";
    }
  }
}

// A slice of rows that starts inside a 128-row scale block: its rows must use their own block's
// scale, on both paths.
TEST(CudaLinear, Fp8RowSliceKeepsItsScaleRows) {
  Gemm gemm;
  Linear linear(gemm);
  const int64_t out = 384, in = 256, r0 = 96, rows = 160;
  QuantMatrix q = make_quant_matrix(MatrixFormat::kFp8Block, out, in, 0.1f);
  linear.reserve(out * in);
  const DeviceMatrix slice = q.m.row_slice(r0, rows);
  for (int64_t n : {2, 33, 100}) {
    const auto x = round_bf16(randn(n * in));
    const std::vector<float> want = host_linear(q.values, in, r0, rows, x, n);
    DeviceBuffer<uint16_t> dx(bf16_bits(x));
    DeviceBuffer<float> dy(n * rows);
    dy.poison();
    linear.run(slice, reinterpret_cast<const __nv_bfloat16*>(dx.get()), dy.get(), n, nullptr);
    EXPECT_TRUE(close(dy.download(), want, kF32Tol)) << n << " rows";
  }
}

// The grouped form (wo_a): row block g of W over columns [g * in, (g + 1) * in) of x, one launch
// (weight_gemv_grouped for few rows, fp8_mma past them), against each block on the host. V4-Flash's
// wo_a (8 groups of 1024 rows over 4096 columns) and a small one.
TEST(CudaLinear, GroupedRowBlocksMatchTheHost) {
  Gemm gemm;
  Linear linear(gemm);
  struct GroupedCase {
    int groups;
    int64_t rows, in;
  };
  for (GroupedCase k : {GroupedCase{8, 8192, 4096}, GroupedCase{4, 512, 256}}) {
    QuantMatrix q = make_quant_matrix(MatrixFormat::kFp8Block, k.rows, k.in, 0.02f);
    linear.reserve(k.rows * k.in);
    const int64_t ol = k.rows / k.groups;
    EXPECT_FALSE(linear.grouped_fits(q.m, k.groups, Linear::kMmaMaxRows + 1));
    for (int64_t n : {int64_t{3}, int64_t{17}, int64_t{64}, Linear::kMmaMaxRows}) {
      ASSERT_TRUE(linear.grouped_fits(q.m, k.groups, n)) << n << " rows";
      const auto x = round_bf16(randn(n * k.groups * k.in));
      std::vector<float> want(n * k.rows), xg(n * k.in);
      for (int g = 0; g < k.groups; ++g) {
        for (int64_t r = 0; r < n; ++r)
          std::copy_n(x.begin() + (r * k.groups + g) * k.in, k.in, xg.begin() + r * k.in);
        const std::vector<float> yg = host_linear(q.values, k.in, g * ol, ol, xg, n);
        for (int64_t r = 0; r < n; ++r)
          std::copy_n(yg.begin() + r * ol, ol, want.begin() + r * k.rows + g * ol);
      }
      DeviceBuffer<uint16_t> dx(bf16_bits(x));
      DeviceBuffer<float> dy(n * k.rows);
      dy.poison();
      linear.run_grouped(q.m, k.groups, reinterpret_cast<const __nv_bfloat16*>(dx.get()), dy.get(),
                         n, nullptr);
      EXPECT_TRUE(close(dy.download(), want, kF32Tol))
          << k.groups << " groups of " << ol << "x" << k.in << ", " << n << " rows";
    }
  }
}

}  // namespace
}  // namespace deepinfer::cuda

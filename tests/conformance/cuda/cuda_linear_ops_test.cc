// Projections over weights in their stored formats (backend/cuda/gemm/linear.h) against the CPU
// reference on the host-dequantized weight: weight_gemv for few rows (the decode path), fp8_wgmma
// for FP8 with 128-row blocks and fp8_mma for other FP8 up to Linear's bounds (one and two 64-row
// passes, K split over the grid for the narrow ones, ragged columns) and the
// dequantize-then-cuBLASLt path for more (weight_gemv at 1,
// 2, 3 and 8+ rows: each its own rows per pass and columns per warp), for FP8 block-scaled,
// MXFP4 and bf16 weights, at
// V4-Flash shapes, ragged ones, and a row slice of FP8 that starts inside a scale block (wo_a's
// groups in small models). The weights are exact in bf16 and both sides multiply the same bf16
// activations, so only the fp32 summation order differs: the fp32 tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "cuda_test_util.h"
#include "deepinfer/backend/cpu/cpu_ops.h"
#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/gemm/fp8_gemv_mma.h"
#include "deepinfer/backend/cuda/gemm/fp8_mma.h"
#include "deepinfer/backend/cuda/gemm/fp8_wgmma.h"
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

// The grouped form's reference: row block g of W's rows [r0, r0 + rows) (groups blocks of
// rows / groups) over x's columns [g * in, (g + 1) * in); x is [n, groups * in].
std::vector<float> host_grouped(const std::vector<float>& w, int64_t in, int64_t r0, int64_t rows,
                                int groups, const std::vector<float>& x, int64_t n) {
  const int64_t ol = rows / groups;
  std::vector<float> want(n * rows), xg(n * in);
  for (int g = 0; g < groups; ++g) {
    for (int64_t r = 0; r < n; ++r)
      std::copy_n(x.begin() + (r * groups + g) * in, in, xg.begin() + r * in);
    const std::vector<float> yg = host_linear(w, in, r0 + g * ol, ol, xg, n);
    for (int64_t r = 0; r < n; ++r)
      std::copy_n(yg.begin() + r * ol, ol, want.begin() + r * rows + g * ol);
  }
  return want;
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
      const auto* xb = reinterpret_cast<const __nv_bfloat16*>(dx.get());
      const bool gemv = linear.takes_gemv(q.m, xb, n);
      const bool wgmma = !gemv && linear.takes_wgmma(q.m, 1, xb, dy.get(), n);
      const bool mma = !gemv && !wgmma && n <= Linear::kMmaMaxRows && fp8_mma_supports(q.m);
      EXPECT_TRUE(close(dy.download(), want, kF32Tol))
          << format_name(k.format) << " " << k.out << "x" << k.in << ", " << n << " rows ("
          << (gemv    ? "weight_gemv"
              : wgmma ? "fp8_wgmma"
              : mma   ? "fp8_mma"
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
    EXPECT_FALSE(linear.grouped_fits(q.m, k.groups,
                                     std::max(Linear::kMmaMaxRows, Linear::kWgmmaMaxRows) + 1));
    for (int64_t n : {int64_t{3}, int64_t{17}, int64_t{64}, Linear::kMmaMaxRows}) {
      ASSERT_TRUE(linear.grouped_fits(q.m, k.groups, n)) << n << " rows";
      const auto x = round_bf16(randn(n * k.groups * k.in));
      const std::vector<float> want = host_grouped(q.values, k.in, 0, k.rows, k.groups, x, n);
      DeviceBuffer<uint16_t> dx(bf16_bits(x));
      const auto* xb = reinterpret_cast<const __nv_bfloat16*>(dx.get());
      DeviceBuffer<float> dy(n * k.rows);
      dy.poison();
      linear.run_grouped(q.m, k.groups, xb, dy.get(), n, nullptr);
      EXPECT_TRUE(close(dy.download(), want, kF32Tol))
          << k.groups << " groups of " << ol << "x" << k.in << ", " << n << " rows ("
          << (linear.takes_wgmma(q.m, k.groups, xb, dy.get(), n) ? "fp8_wgmma" : "other") << ")";
      // fp8_mma's grouped form, which Linear leaves to shapes fp8_wgmma does not take.
      if (n > Linear::kGemvMaxRows) {
        dy.poison();
        fp8_mma_grouped(q.m, k.groups, xb, n, dy.get(), nullptr, 0, nullptr);
        EXPECT_TRUE(close(dy.download(), want, kF32Tol))
            << "fp8_mma_grouped: " << k.groups << " groups of " << ol << "x" << k.in << ", " << n
            << " rows";
      }
    }
  }
}

// fp8_wgmma called directly, whatever Linear's row bounds: V4-Flash's FP8 projections (wq_a,
// wkv and the shared expert's w1 split K at few rows; wq_b; wo_b), V4.1's 32 x 32 scale blocks and
// 64-wide ones, one and two 64-row passes a block and several passes (prefill's rows), with and
// without partials for split K, grouped (wo_a) and a row slice starting inside a scale block.
TEST(CudaLinear, Fp8WgmmaMatchesTheHost) {
  struct WgmmaCase {
    int64_t out, in;
    int br, bc, groups;
    int64_t r0, rows;  // the slice of W's rows taken (rows 0: all)
  };
  const std::vector<WgmmaCase> cases = {
      {1024, 4096, 128, 128, 1, 0, 0}, {512, 4096, 128, 128, 1, 0, 0},
      {2048, 4096, 128, 128, 1, 0, 0}, {32768, 1024, 128, 128, 1, 0, 0},
      {4096, 8192, 128, 128, 1, 0, 0}, {1024, 4096, 32, 32, 1, 0, 0},
      {512, 1024, 64, 64, 1, 0, 0},    {8192, 4096, 128, 128, 8, 0, 0},
      {512, 256, 128, 128, 4, 0, 0},   {384, 512, 128, 128, 1, 64, 256}};
  for (const WgmmaCase& k : cases) {
    QuantMatrix q = make_quant_matrix(MatrixFormat::kFp8Block, k.out, k.in,
                                      1.0f / std::sqrt(float(k.in)), k.br, k.bc);
    const int64_t rows = k.rows ? k.rows : k.out;
    const DeviceMatrix w = k.rows ? q.m.row_slice(k.r0, rows) : q.m;
    ASSERT_TRUE(fp8_wgmma_supports(w, k.groups)) << k.out << "x" << k.in;
    for (int64_t n : {1, 17, 64, 65, 128, 200, 300}) {
      if (k.out * k.in >= (int64_t{1} << 25) && n > 128) continue;  // keeps the host's share short
      const auto x = round_bf16(randn(n * k.groups * k.in));
      const std::vector<float> want = host_grouped(q.values, k.in, k.r0, rows, k.groups, x, n);
      DeviceBuffer<uint16_t> dx(bf16_bits(x));
      DeviceBuffer<float> partials(8 * n * rows);
      for (bool split : {false, true}) {
        DeviceBuffer<float> dy(n * rows);
        dy.poison();
        fp8_wgmma(w, k.groups, reinterpret_cast<const __nv_bfloat16*>(dx.get()), n, dy.get(),
                  split ? partials.get() : nullptr, split ? 8 * n * rows : 0, nullptr);
        EXPECT_TRUE(close(dy.download(), want, kF32Tol))
            << k.out << "x" << k.in << " (blocks " << k.br << "x" << k.bc << ", " << k.groups
            << " groups, rows " << k.r0 << ".." << k.r0 + rows << "), " << n << " rows"
            << (split ? ", K split where the grid is short" : "");
      }
    }
  }
}

// weight_gemv's two kernels called directly: the streaming one (gemm/gemv_stream.cu) must give
// the warp-per-column one's bits (the same words a lane, the same order, the same k splits), on
// V4-Flash's decode shapes (wq_a and wkv split k; wq_b; wo_b; the shared expert's w2; bf16 ones
// split 8 ways), ragged ones, a grouped matrix (wo_a) and an FP8 slice starting inside a scale
// block, at the rows decode has and past them (batch-invariant mode takes it at any batch); and
// both must match the host.
TEST(CudaLinear, GemvStreamGivesTheWarpKernelsBits) {
  struct StreamCase {
    MatrixFormat format;
    int64_t out, in;
    int groups;
    int64_t r0, rows;  // the slice of W's rows taken (rows 0: all)
  };
  const MatrixFormat kFp8 = MatrixFormat::kFp8Block, kMx = MatrixFormat::kMxfp4,
                     kBf = MatrixFormat::kBf16;
  const std::vector<StreamCase> cases = {
      {kFp8, 1024, 4096, 1, 0, 0}, {kFp8, 512, 4096, 1, 0, 0},  {kFp8, 32768, 1024, 1, 0, 0},
      {kFp8, 4096, 8192, 1, 0, 0}, {kFp8, 4096, 2048, 1, 0, 0}, {kBf, 64, 4096, 1, 0, 0},
      {kBf, 1024, 4096, 1, 0, 0},  {kMx, 2048, 4096, 1, 0, 0},  {kMx, 96, 64, 1, 0, 0},
      {kFp8, 301, 256, 1, 0, 0},   {kFp8, 77, 48, 1, 0, 0},     {kBf, 300, 256, 1, 0, 0},
      {kFp8, 8192, 4096, 8, 0, 0}, {kFp8, 384, 512, 1, 96, 160}};
  for (const StreamCase& k : cases) {
    QuantMatrix q = make_quant_matrix(k.format, k.out, k.in, 1.0f / std::sqrt(float(k.in)));
    const int64_t rows = k.rows ? k.rows : k.out;
    const DeviceMatrix w = k.rows ? q.m.row_slice(k.r0, rows) : q.m;
    ASSERT_TRUE(weight_gemv_supports(w)) << k.out << "x" << k.in;
    for (int64_t n : {1, 2, 3, 5, 8, 16, 19, 40}) {
      if (k.out * k.in >= (int64_t{1} << 24) && n > 16) continue;  // keeps the host's share short
      const auto x = round_bf16(randn(n * k.groups * k.in));
      const std::vector<float> want = host_grouped(q.values, k.in, k.r0, rows, k.groups, x, n);
      DeviceBuffer<uint16_t> dx(bf16_bits(x));
      const auto* xb = reinterpret_cast<const __nv_bfloat16*>(dx.get());
      std::vector<float> got[2];
      for (GemvKernel kernel : {GemvKernel::kWarpPerColumn, GemvKernel::kStream}) {
        DeviceBuffer<float> dy(n * rows);
        dy.poison();
        if (k.groups > 1)
          weight_gemv_grouped(w, k.groups, xb, n, dy.get(), nullptr, kernel);
        else
          weight_gemv(w, xb, n, dy.get(), nullptr, kernel);
        got[kernel == GemvKernel::kStream] = dy.download();
      }
      const std::string what = std::string(format_name(k.format)) + " " + std::to_string(k.out) +
                               "x" + std::to_string(k.in) + " (" + std::to_string(k.groups) +
                               " groups, rows " + std::to_string(k.r0) + ".." +
                               std::to_string(k.r0 + rows) + "), " + std::to_string(n) + " rows";
      EXPECT_TRUE(close(got[0], want, kF32Tol)) << "warp per column: " << what;
      ASSERT_EQ(got[1].size(), got[0].size());
      EXPECT_EQ(std::memcmp(got[1].data(), got[0].data(), got[0].size() * sizeof(float)), 0)
          << "the streaming kernel's bits differ from the warp kernel's: " << what;
    }
  }
}

// weight_gemv's tensor-core kernel for FP8 (GemvKernel::kMma, gemm/fp8_gemv_mma.cu) against the
// host, on V4-Flash's decode shapes (wq_a and wkv split k 8 ways, wq_b, wo_b, the shared expert's
// w2, the grouped wo_a), ragged rows, a small grouped matrix, a slice starting inside a scale
// block, and V4.1's 32 x 32 and 64 x 64 scale blocks (each lane's own scale); and a row's bits in
// a batch equal its bits alone (its first and last rows: the last in a pass of fewer than 8, or
// in the second tile of a 16-row pass). Matrices it does not take (32-wide blocks whose scales
// are not all powers of two, k not a multiple of 128) are refused by fp8_gemv_mma_supports.
TEST(CudaLinear, Fp8GemvMmaMatchesTheHostAndKeepsARowsBits) {
  struct MmaCase {
    int64_t out, in;
    int groups;
    int64_t r0, rows;  // the slice of W's rows taken (rows 0: all)
    int block = 128;   // scale blocks of block x block
  };
  const std::vector<MmaCase> cases = {
      {1024, 4096, 1, 0, 0},     {512, 4096, 1, 0, 0},     {32768, 1024, 1, 0, 0},
      {4096, 8192, 1, 0, 0},     {4096, 2048, 1, 0, 0},    {8192, 4096, 8, 0, 0},
      {301, 256, 1, 0, 0},       {512, 256, 4, 0, 0},      {384, 512, 1, 96, 160},
      {1024, 4096, 1, 0, 0, 32}, {512, 1024, 1, 0, 0, 64}, {256, 512, 4, 0, 0, 32},
      {384, 512, 1, 40, 200, 32}};
  for (const MmaCase& k : cases) {
    QuantMatrix q = make_quant_matrix(MatrixFormat::kFp8Block, k.out, k.in,
                                      1.0f / std::sqrt(float(k.in)), k.block, k.block);
    ASSERT_TRUE(q.m.pow2_scales) << "the fixture's scales are E8M0";
    const int64_t rows = k.rows ? k.rows : k.out;
    const DeviceMatrix w = k.rows ? q.m.row_slice(k.r0, rows) : q.m;
    ASSERT_TRUE(fp8_gemv_mma_supports(w, k.groups)) << k.out << "x" << k.in;
    const auto run = [&](const std::vector<float>& x, int64_t n) {
      DeviceBuffer<uint16_t> dx(bf16_bits(x));
      const auto* xb = reinterpret_cast<const __nv_bfloat16*>(dx.get());
      DeviceBuffer<float> dy(n * rows);
      dy.poison();
      if (k.groups > 1)
        weight_gemv_grouped(w, k.groups, xb, n, dy.get(), nullptr, GemvKernel::kMma);
      else
        weight_gemv(w, xb, n, dy.get(), nullptr, GemvKernel::kMma);
      return dy.download();
    };
    for (int64_t n : {1, 2, 3, 5, 8, 9, 16, 19, 40}) {
      if (k.out * k.in >= (int64_t{1} << 24) && n > 16) continue;  // keeps the host's share short
      const int64_t in = k.groups * k.in;
      const auto x = round_bf16(randn(n * in));
      const std::vector<float> want = host_grouped(q.values, k.in, k.r0, rows, k.groups, x, n);
      const std::vector<float> got = run(x, n);
      const std::string what = std::to_string(k.out) + "x" + std::to_string(k.in) + " (blocks " +
                               std::to_string(k.block) + ", " + std::to_string(k.groups) +
                               " groups, rows " + std::to_string(k.r0) + ".." +
                               std::to_string(k.r0 + rows) + "), " + std::to_string(n) + " rows";
      EXPECT_TRUE(close(got, want, kF32Tol)) << what;
      for (int64_t r : {int64_t{0}, n - 1}) {
        const std::vector<float> xr(x.begin() + r * in, x.begin() + (r + 1) * in);
        const std::vector<float> alone = run(xr, 1);
        EXPECT_EQ(std::memcmp(alone.data(), got.data() + r * rows, rows * sizeof(float)), 0)
            << "row " << r << " alone differs from its bits in the batch: " << what;
      }
    }
  }
  QuantMatrix not_pow2 = make_quant_matrix(MatrixFormat::kFp8Block, 512, 1024, 0.03f, 32, 32);
  not_pow2.m.pow2_scales = false;
  EXPECT_FALSE(fp8_gemv_mma_supports(not_pow2.m, 1)) << "32-wide blocks, scales not all 2^k";
  not_pow2.m.block_cols = not_pow2.m.block_rows = 128;  // 128-wide blocks take any fp32 scale
  EXPECT_TRUE(fp8_gemv_mma_supports(not_pow2.m, 1));
  const QuantMatrix short_k = make_quant_matrix(MatrixFormat::kFp8Block, 64, 192, 0.05f);
  EXPECT_FALSE(fp8_gemv_mma_supports(short_k.m, 1)) << "k not a multiple of 128";
}

}  // namespace
}  // namespace deepinfer::cuda

#include <algorithm>

#include "deepinfer/backend/cuda/bulk_copy.cuh"
#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/gemm/fp8_gemv_mma.h"
#include "deepinfer/backend/cuda/gemm/gemv_stream.h"
#include "deepinfer/backend/cuda/gemm/split_k.h"
#include "deepinfer/backend/cuda/gemm/weight_gemv.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/quant/weight_rows.cuh"
#include "deepinfer/backend/cuda/reduce.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kWarps = 8;
// 1: GemvKernel::kAuto takes the streaming kernel (gemv_stream.cu) wherever it fits. Off: it
// made B=1 3.54 ms a step against 2.55 on an H100 (docs/gpu_b1_step/).
#ifndef GEMV_STREAM
#define GEMV_STREAM 0
#endif
constexpr bool kGemvStream = GEMV_STREAM != 0;
// 1: GemvKernel::kAuto takes fp8_gemv_mma (tensor cores) for the FP8 matrices it fits. A variant
// to time (scripts/build_gpu_variants.sh) until measured.
#ifndef GEMV_MMA
#define GEMV_MMA 0
#endif
constexpr bool kGemvMma = GEMV_MMA != 0;
// Column blocks (a block's kWarps / ks * C adjacent rows: one run of memory) that a block keeps
// asked of L2 by bulk prefetch, its current one included: the first before the PDL wait, beside
// the kernel ahead, then each next one as the block starts a column block. 0: none (only
// prefetch_first's words). Measured on an H100 (docs/gpu_b1_step/run7_h100): 2 ahead in a grid
// of 2 blocks an SM made B=1 2.43 -> 2.47 ms a step (projections 0.467 -> 0.481 ms, output
// projection 0.362 -> 0.378), so it is off; other distances are untried.
#ifndef GEMV_L2_BLOCKS
#define GEMV_L2_BLOCKS 0
#endif
// Blocks an SM of a grid that stays and walks the column blocks (b, b + grid, ...); 0: a block
// per column block, as many waves as that makes.
#ifndef GEMV_BLOCKS_PER_SM
#define GEMV_BLOCKS_PER_SM 0
#endif
constexpr int kL2Blocks = GEMV_L2_BLOCKS;
constexpr int kBlocksPerSm = GEMV_BLOCKS_PER_SM;
// Columns a warp takes at one or two rows of x where the rows divide (else 2, else 1): the weight
// words a lane has in flight. 4 made B=1 0.17 ms slower on an H100 (docs/gpu_pdl/).
constexpr int kWideColumns = 2;
constexpr int kRows = weight_rows::kMaxRowsPerPass;  // rows of x per pass, at most
using weight_rows::rows_per_pass;

// The C columns a warp of gemv_kernel sums (col: the first; past the matrix when !live) and its
// share of k: ks adjacent warps split a column group's k, warp % ks taking part warp % ks.
struct WarpShare {
  int64_t col, first, k_begin, k_len;
  int share;
  bool live;
};
template <int C>
__device__ inline WarpShare warp_share(const DeviceMatrix& w, int ks, int64_t block) {
  const int warp = threadIdx.x >> 5;
  WarpShare s;
  s.share = warp % ks;
  s.col = (block * (kWarps / ks) + warp / ks) * C;
  s.live = s.col < w.rows;
  s.first = min(s.col, w.rows - 1);
  s.k_len = w.cols / ks;
  s.k_begin = s.share * s.k_len;
  return s;
}
template <int C>
__device__ inline void rows_of(const DeviceMatrix& w, int64_t first, weight_rows::Row (&row)[C]) {
#pragma unroll
  for (int c = 0; c < C; ++c) row[c] = weight_rows::row_of(w, min(first + c, w.rows - 1));
}

// Asks L2 for column block `block`'s weight rows (kWarps / ks * C adjacent rows, one run of
// memory; its scales are small and not asked for).
template <MatrixFormat F, int C>
__device__ inline void prefetch_block(const DeviceMatrix& w, int ks, int64_t block) {
  const int64_t rows_a_block = int64_t{kWarps / ks} * C, r0 = block * rows_a_block;
  if (r0 >= w.rows) return;
  const int64_t row_bytes = weight_rows::byte_of<F>(w.cols);
  bulk::prefetch_l2_run(static_cast<const uint8_t*>(w.data) + r0 * row_bytes,
                        min(rows_a_block, w.rows - r0) * row_bytes);
}

// Output column c belongs to group c / (w.rows / groups), which reads x's columns [g * w.cols,
// (g + 1) * w.cols) of rows ldx apart; y is [n, w.rows]. One group: a plain projection. A warp
// owns C adjacent columns (C = 2 at decode's one or two rows: twice the weight bytes in flight
// a warp, where a short row such as K = 1024 in FP8 is only two loads a lane); a pair never
// straddles a group. With ks > 1 (k_splits), ks adjacent warps share the columns, each summing
// its own ks-th of k; the first adds the others' sums to its own, in warp order. Block b takes
// column blocks b, b + gridDim.x, ... (of `blocks`): one each unless the grid stays
// (kBlocksPerSm). A column's sums do not depend on the grid, so neither do its bits.
// One block an SM asked for: ptxas then gives FP8 column pairs at one row 91 registers (two
// blocks an SM fit); left without it, it picks 80 and spills 4 bytes. Asking for three blocks
// (80 registers) changed no step time on an H100 (docs/gpu_pdl/).
template <MatrixFormat F, int R, int C>
__global__ void __launch_bounds__(kWarps * 32, 1)
    gemv_kernel(DeviceMatrix w, const __nv_bfloat16* x, int64_t ldx, int groups, int64_t n, int ks,
                int64_t blocks, float* y) {
  // The rows' first words head for L2 while the kernel ahead finishes: B=1 2.80 -> 2.73 ms a
  // step on an H100 (docs/gpu_pdl/).
  pdl_grid_begin([&] {
    if constexpr (kL2Blocks > 0) {
      for (int i = 0; i < kL2Blocks; ++i)
        prefetch_block<F, C>(w, ks, blockIdx.x + int64_t{i} * gridDim.x);
    } else {
      const WarpShare ws = warp_share<C>(w, ks, blockIdx.x);
      if (ws.live) {
        weight_rows::Row row[C];
        rows_of(w, ws.first, row);
        weight_rows::prefetch_first<F>(row, ws.k_begin + ws.k_len, ws.k_begin);
      }
    }
  });
  __shared__ float part[kWarps][C][R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    if constexpr (kL2Blocks > 0)
      prefetch_block<F, C>(w, ks, block + int64_t{kL2Blocks} * gridDim.x);
    const WarpShare ws = warp_share<C>(w, ks, block);
    if (ks == 1 && !ws.live) return;  // no barrier below when ks == 1; later blocks are past too
    weight_rows::Row row[C];
    rows_of(w, ws.first, row);
    const __nv_bfloat16* xg = x + (ws.first / (w.rows / groups)) * w.cols;
    for (int64_t r0 = 0; r0 < n; r0 += R) {
      const int rn = n - r0 < R ? static_cast<int>(n - r0) : R;
      float acc[C][R];
      if (ws.live)
        weight_rows::dot_rows<F, C, R>(row, xg + r0 * ldx, ldx, ws.k_begin + ws.k_len, rn, acc,
                                       ws.k_begin);
      if (ks > 1) {
        if (ws.live && lane == 0)
#pragma unroll
          for (int c = 0; c < C; ++c)
#pragma unroll
            for (int r = 0; r < R; ++r) part[warp][c][r] = acc[c][r];
        __syncthreads();
        if (ws.live && ws.share == 0)
#pragma unroll
          for (int c = 0; c < C; ++c)
#pragma unroll
            for (int r = 0; r < R; ++r) {
              float v = part[warp][c][r];
              for (int s = 1; s < ks; ++s) v += part[warp + s][c][r];
              acc[c][r] = v;
            }
        __syncthreads();  // part is rewritten by the next pass
      }
      if (!ws.live || ws.share != 0) continue;
#pragma unroll
      for (int c = 0; c < C; ++c)
#pragma unroll
        for (int r = 0; r < R; ++r)
          if (r < rn && lane == r && ws.col + c < w.rows)
            y[(r0 + r) * w.rows + ws.col + c] = acc[c][r];
    }
  }
}

// Warps a block gives each column pair (a power of two up to kWarps): a matrix whose plain grid
// would be under kWantBlocks blocks splits k so that it reaches them, while each warp's share
// stays at least one 16-byte load a lane. Decode's small projections (wq_a: 1024 rows, 64 blocks)
// left most SMs idle with each warp waiting on its own loads. Chosen by shape alone, never by the
// rows of x, so a row's sums are the same bits in any batch (batch invariance, decision 0014).
int k_splits(const DeviceMatrix& w, int columns_a_warp) {
  constexpr int64_t kWantBlocks = 256;
  const int64_t blocks = (w.rows + kWarps * columns_a_warp - 1) / (kWarps * columns_a_warp);
  const int64_t min_share = 32 * int64_t{DeviceMatrix::per_load(w.format)};
  int ks = 1;
  while (ks < kWarps && blocks * ks < kWantBlocks && w.cols % (2 * ks * min_share) == 0) ks *= 2;
  return ks;
}

// fp32 [n, in] x [out, in]^T, a warp per output column; each lane sums its k (lane, lane + 32,
// ...) in order, then the warp's butterfly: the same for a row in any n.
__global__ void __launch_bounds__(kWarps * 32)
    f32_kernel(const float* w, const float* x, int64_t n, int64_t out, int64_t in, float* y) {
  pdl_grid_begin();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t col = int64_t{blockIdx.x} * kWarps + warp;
  if (col >= out) return;
  const float* wr = w + col * in;
  for (int64_t r0 = 0; r0 < n; r0 += kRows) {
    const int rn = n - r0 < kRows ? static_cast<int>(n - r0) : kRows;
    float acc[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;
    for (int64_t k = lane; k < in; k += 32) {
      const float wv = __ldg(wr + k);
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        if (r < rn) acc[r] = fmaf(wv, x[(r0 + r) * in + k], acc[r]);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float v = warp_reduce(acc[r], SumOp{});
      if (r < rn && lane == 0) y[(r0 + r) * out + col] = v;
    }
  }
}

template <int R, int C>
void launch_format(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t ldx, int groups,
                   int64_t n, float* y, cudaStream_t stream) {
  const int ks = k_splits(w, C);
  const int64_t columns_a_block = int64_t{kWarps / ks} * C;
  const int64_t column_blocks = (w.rows + columns_a_block - 1) / columns_a_block;
  const unsigned blocks = static_cast<unsigned>(
      kBlocksPerSm > 0 ? std::min<int64_t>(column_blocks, int64_t{device_sms()} * kBlocksPerSm)
                       : column_blocks);
  switch (w.format) {
    case MatrixFormat::kBf16:
      launch_kernel(gemv_kernel<MatrixFormat::kBf16, R, C>, blocks, kWarps * 32, 0, stream, w, x,
                    ldx, groups, n, ks, column_blocks, y);
      break;
    case MatrixFormat::kFp8Block:
      launch_kernel(gemv_kernel<MatrixFormat::kFp8Block, R, C>, blocks, kWarps * 32, 0, stream, w,
                    x, ldx, groups, n, ks, column_blocks, y);
      break;
    case MatrixFormat::kMxfp4:
      launch_kernel(gemv_kernel<MatrixFormat::kMxfp4, R, C>, blocks, kWarps * 32, 0, stream, w, x,
                    ldx, groups, n, ks, column_blocks, y);
      break;
  }
}

void launch(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t ldx, int groups, int64_t n,
            float* y, cudaStream_t stream, GemvKernel kernel) {
  if (!weight_gemv_supports(w) || reinterpret_cast<uintptr_t>(x) % 16 != 0 || ldx % 8 != 0 ||
      groups < 1 || w.rows % groups != 0) {
    std::fprintf(stderr,
                 "weight_gemv: unsupported operands (rows %lld, cols %lld, format %d, %d groups, "
                 "ldx %lld)\n",
                 static_cast<long long>(w.rows), static_cast<long long>(w.cols),
                 static_cast<int>(w.format), groups, static_cast<long long>(ldx));
    std::abort();
  }
  if (n == 0 || w.rows == 0) return;
  if (kernel == GemvKernel::kMma ||
      (kernel == GemvKernel::kAuto && kGemvMma && fp8_gemv_mma_supports(w, groups))) {
    fp8_gemv_mma(w, groups, x, ldx, n, y, stream);  // aborts, naming w, where it does not fit
    return;
  }
  const bool pairs = (w.rows / groups) % 2 == 0;
  const bool wide = kWideColumns > 2 && (w.rows / groups) % kWideColumns == 0;
  if (kernel != GemvKernel::kWarpPerColumn) {
    // The k splits gemv_kernel would take here, which the streaming kernel's sums follow.
    const int r = rows_per_pass(n);
    const int shares = k_splits(w, r > 2 ? 1 : wide ? kWideColumns : pairs ? 2 : 1);
    const bool fits = gemv_detail::stream_fits(w, shares);
    if (kernel == GemvKernel::kStream && !fits) {
      std::fprintf(stderr,
                   "weight_gemv: the streaming kernel does not take a %lld x %lld matrix "
                   "(format %d) at %d k splits\n",
                   static_cast<long long>(w.rows), static_cast<long long>(w.cols),
                   static_cast<int>(w.format), shares);
      std::abort();
    }
    if (fits && (kernel == GemvKernel::kStream || kGemvStream)) {
      gemv_detail::gemv_stream(w, x, ldx, groups, n, shares, y, stream);
      return;
    }
  }
  switch (rows_per_pass(n)) {
    case 1:
      wide    ? launch_format<1, kWideColumns>(w, x, ldx, groups, n, y, stream)
      : pairs ? launch_format<1, 2>(w, x, ldx, groups, n, y, stream)
              : launch_format<1, 1>(w, x, ldx, groups, n, y, stream);
      break;
    case 2:
      wide    ? launch_format<2, kWideColumns>(w, x, ldx, groups, n, y, stream)
      : pairs ? launch_format<2, 2>(w, x, ldx, groups, n, y, stream)
              : launch_format<2, 1>(w, x, ldx, groups, n, y, stream);
      break;
    case 4:
      launch_format<4, 1>(w, x, ldx, groups, n, y, stream);
      break;
    default:
      launch_format<kRows, 1>(w, x, ldx, groups, n, y, stream);
      break;
  }
}

}  // namespace

bool weight_gemv_supports(const DeviceMatrix& w) { return w.reads_in_vectors(); }

void weight_gemv(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t n, float* y,
                 cudaStream_t stream, GemvKernel kernel) {
  launch(w, x, w.cols, 1, n, y, stream, kernel);
}

void f32_gemv(const float* w, const float* x, int64_t n, int64_t out, int64_t in, float* y,
              cudaStream_t stream) {
  if (n == 0 || out == 0) return;
  const unsigned blocks = static_cast<unsigned>((out + kWarps - 1) / kWarps);
  launch_kernel(f32_kernel, blocks, kWarps * 32, 0, stream, w, x, n, out, in, y);
}

void weight_gemv_grouped(const DeviceMatrix& w, int groups, const __nv_bfloat16* x, int64_t n,
                         float* y, cudaStream_t stream, GemvKernel kernel) {
  launch(w, x, int64_t{groups} * w.cols, groups, n, y, stream, kernel);
}

}  // namespace deepinfer::cuda

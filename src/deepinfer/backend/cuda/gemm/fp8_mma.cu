// W8A16 on tensor cores (fp8_mma.h). Block (pass of 16 MT rows of x, 128 columns of W, split of
// K) walks its K in 128-wide tiles, each tile's weight bytes and activation rows copied into
// shared memory by cp.async kStages - 1 tiles ahead. Warp w owns columns 16w..16w + 15 (two n8
// mma tiles) for all the pass's rows.
//
// The k map (as in the MXFP4 expert kernel): a dot product may walk k in any order, so thread
// t (= lane % 4) takes the tile's k [32t, 32t + 32), 32 contiguous weight bytes of a column, and
// mma step (p, h) gives its k positions {2t, 2t+1} and {2t+8, 2t+9} the actual k 32t + 8p + 4h +
// {0, 1} and {2, 3}: byte pairs of one 32-bit word on the weight side, whole 32-bit halves of a
// 16-byte activation chunk on the other, so neither side needs a permute.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/gemm/fp8_fragments.cuh"
#include "deepinfer/backend/cuda/gemm/fp8_mma.h"
#include "deepinfer/backend/cuda/gemm/split_k.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/mma_sync.cuh"
#include "deepinfer/backend/cuda/smem_limit.h"

namespace deepinfer::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kBN = 16 * kWarps;  // columns per block
constexpr int kKB = 128;          // k per tile
// Three stages, two blocks an SM (96 KB each, 128 registers). A variant to time
// (scripts/build_gpu_variants.sh): two stages fit three blocks, at 80 registers with spills
// (120 bytes for 64-row passes), more warps to hide the per-instruction latency ncu shows.
#ifndef FP8_MMA_STAGES
#define FP8_MMA_STAGES 3
#endif
constexpr int kStages = FP8_MMA_STAGES;
constexpr int kMinBlocks = kStages == 2 ? 3 : 2;

using Args = Fp8GemmArgs;

template <int MT>
struct StageLayout {
  static constexpr int kW = kBN * kKB;          // [column][8 swizzled chunks of 16 E4M3]
  static constexpr int kX = 16 * MT * kKB * 2;  // [row][16 swizzled chunks of 8 bf16]
  static constexpr int kBytes = kW + kX;
};

// Where chunk c of a row sits, so that the eight lanes of a 16-byte load phase (rows or columns
// g, g + 1; t = 0..3) hit eight different bank groups: activations read chunk 4t + p (the MXFP4
// expert kernel's swizzle), weights chunks 2t + i.
__device__ inline int x_chunk(int r, int c) { return c ^ ((((c >> 3) & 1) << 1) | (r & 1)); }
__device__ inline int w_chunk(int col, int c) { return c ^ (col & 1); }

template <int MT>
__global__ void __launch_bounds__(kThreads, kMinBlocks) fp8_mma_kernel(Args a) {
  pdl_grid_begin();
  using L = StageLayout<MT>;
  extern __shared__ __align__(16) uint8_t fp8_sm[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int64_t m0 = int64_t{blockIdx.x} * 16 * MT, n0 = int64_t{blockIdx.y} * kBN;
  const int rn = static_cast<int>(std::min<int64_t>(16 * MT, a.n - m0));
  const int all = static_cast<int>(a.K / kKB), z = static_cast<int>(blockIdx.z);
  const int first = all * z / a.splits, tiles = all * (z + 1) / a.splits - first;

  // Copies per stage: weight chunks (column tid / 8 + 32 h, chunk tid % 8) and activation chunks
  // (row tid / 16 + 16 i, chunk tid % 16); rows and columns past the end read zeros.
  constexpr int kWc = kBN * 8 / kThreads, kXc = 16 * MT * 16 / kThreads;
  const uint8_t* wsrc[kWc];
  bool wvalid[kWc];
#pragma unroll
  for (int h = 0; h < kWc; ++h) {
    const int64_t col = n0 + tid / 8 + h * (kThreads / 8);
    wvalid[h] = col < a.N;
    wsrc[h] = a.w + (wvalid[h] ? col * a.K : 0) + 16 * (tid % 8);
  }
  const __nv_bfloat16* xsrc[kXc];
  const __nv_bfloat16* x = a.x + (a.group_rows ? n0 / a.group_rows * a.K : 0);
#pragma unroll
  for (int i = 0; i < kXc; ++i) {
    const int r = tid / 16 + i * (kThreads / 16);
    xsrc[i] = x + (m0 + (r < rn ? r : 0)) * a.x_stride + 8 * (tid % 16);
  }
  const auto load = [&](int tile) {
    uint8_t* st = fp8_sm + (tile % kStages) * L::kBytes;
    const int64_t k0 = int64_t{first + tile} * kKB;
#pragma unroll
    for (int h = 0; h < kWc; ++h) {
      const int col = tid / 8 + h * (kThreads / 8);
      cp_async16(st + col * kKB + 16 * w_chunk(col, tid % 8), wsrc[h] + k0, wvalid[h]);
    }
#pragma unroll
    for (int i = 0; i < kXc; ++i) {
      const int r = tid / 16 + i * (kThreads / 16);
      cp_async16(st + L::kW + r * kKB * 2 + 16 * x_chunk(r, tid % 16), xsrc[i] + k0, r < rn);
    }
  };

  // This thread's two columns (n8 tiles nt = 0, 1: column g of each) and their scale rows.
  const float* srow[2];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const int64_t col = n0 + warp * 16 + nt * 8 + g;
    srow[nt] = col < a.N ? a.scale + ((a.row0 + col) / a.block_rows) * a.scale_cols : nullptr;
  }

  // Shared-memory offsets of this thread's reads in a stage: row g's chunk 4t + p sits at
  // 4t + (p ^ xsw) (x_chunk: rows 16 mt + g (+ 8) share g's parity, chunks 4t + p t's bit 1),
  // column c's chunk 2t + i at (2t + i) ^ (g & 1).
  const int xsw = (((t >> 1) & 1) << 1) | (g & 1);
  const int xoff = L::kW + g * kKB * 2 + 64 * t;
  int woff[2][2];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int i = 0; i < 2; ++i)
      woff[nt][i] = (warp * 16 + nt * 8 + g) * kKB + 16 * ((2 * t + i) ^ (g & 1));

  float acc[2][MT][4] = {};
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < tiles) load(s);
    cp_async_commit();
  }
  for (int tile = 0; tile < tiles; ++tile) {
    // This thread's k (32t..32t + 31 of the tile) lies in one scale block (block_cols % 32 == 0).
    const int kb = ((first + tile) * kKB + 32 * t) / a.block_cols;
    float sc[2];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) sc[nt] = srow[nt] ? __ldg(srow[nt] + kb) : 0.0f;
    cp_async_wait<kStages - 2>();
    __syncthreads();  // the tile is in; every warp is done with the stage the next load takes
    if (tile + kStages - 1 < tiles) load(tile + kStages - 1);
    cp_async_commit();
    const uint8_t* st = fp8_sm + (tile % kStages) * L::kBytes;
    uint4 raw[2][2];  // [nt][chunk 2t + i]: k 32t + 16i .. + 16 of the column
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 2; ++i) raw[nt][i] = *reinterpret_cast<const uint4*>(st + woff[nt][i]);
#pragma unroll
    for (int p = 0; p < 4; ++p) {  // activation chunk 4t + p: k 32t + 8p .. + 8
      uint32_t b[2][2][2];         // [h][nt][b0, b1]
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const int word = 2 * p + h;  // k 32t + 4 word .. + 4
          const uint32_t w = reinterpret_cast<const uint32_t*>(&raw[nt][word / 4])[word % 4];
          expand_fp8x4(w, sc[nt], b[h][nt][0], b[h][nt][1]);
        }
      // Every row tile, padding ones too (their rows are zeros): straight-line code lets the
      // loads of later tiles run ahead of the mma of earlier ones.
      uint4 x[MT][2];
      const uint8_t* xp = st + xoff + 16 * (p ^ xsw);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr)
          x[mt][hr] = *reinterpret_cast<const uint4*>(xp + (mt * 16 + 8 * hr) * kKB * 2);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const uint4 x0 = x[mt][0], x1 = x[mt][1];
        const uint32_t fa[2][4] = {{x0.x, x1.x, x0.y, x1.y}, {x0.z, x1.z, x0.w, x1.w}};
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int nt = 0; nt < 2; ++nt)
            mma_bf16_16816(acc[nt][mt], fa[h], b[h][nt][0], b[h][nt][1]);
      }
    }
  }
  cp_async_wait<0>();

  // c[0..1]: row g, columns 2t, 2t + 1 of the n8 tile; c[2..3]: row g + 8.
  float* out = a.out + int64_t{z} * a.n * a.N;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int r = mt * 16 + g + 8 * hr;
        const int64_t col = n0 + warp * 16 + nt * 8 + 2 * t;
        if (r >= rn || col >= a.N) continue;
        float* o = out + (m0 + r) * a.N + col;
        const float* c = &acc[nt][mt][2 * hr];
        if (a.N % 2 == 0) {
          *reinterpret_cast<float2*>(o) = make_float2(c[0], c[1]);
        } else {
          o[0] = c[0];
          if (col + 1 < a.N) o[1] = c[1];
        }
      }
}

template <int MT>
void launch(const Args& a, cudaStream_t stream) {
  constexpr size_t smem = size_t{StageLayout<MT>::kBytes} * kStages;
  static SmemLimit limit(reinterpret_cast<const void*>(fp8_mma_kernel<MT>));
  limit.ensure(smem);
  const dim3 grid(static_cast<unsigned>((a.n + 16 * MT - 1) / (16 * MT)),
                  static_cast<unsigned>((a.N + kBN - 1) / kBN), static_cast<unsigned>(a.splits));
  launch_kernel(fp8_mma_kernel<MT>, grid, kThreads, smem, stream, a);
}

}  // namespace

bool fp8_mma_supports(const DeviceMatrix& w) {
  return w.format == MatrixFormat::kFp8Block && w.data && w.cols > 0 && w.cols % kKB == 0 &&
         w.block_cols > 0 && w.block_cols % 32 == 0 && w.block_rows > 0 &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
}

namespace {

void run(const DeviceMatrix& w, int groups, const __nv_bfloat16* x, int64_t n, float* y,
         float* partials, int64_t partial_floats, cudaStream_t stream) {
  if (n == 0 || w.rows == 0) return;
  if (!fp8_mma_grouped_supports(w, groups) || reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    std::fprintf(stderr,
                 "fp8_mma: needs FP8 block-scaled weights with cols a multiple of %d, block_cols "
                 "of 32, 16-byte aligned, and rows a group of %d (got format %d, %lld x %lld, "
                 "block %d x %d, %d groups)\n",
                 kKB, kBN, static_cast<int>(w.format), static_cast<long long>(w.rows),
                 static_cast<long long>(w.cols), w.block_rows, w.block_cols, groups);
    std::abort();
  }
  const int mt = n <= 32 ? 2 : 4;
  Fp8GemmArgs a = fp8_gemm_args(w, groups, x, n, y);
  // A grid short of a block an SM splits K, at least two tiles a split, where the partials fit
  // (not two an SM, which fit: the sum of the splits costs a launch, about 4 us at B=32).
  const int64_t blocks = ((n + 16 * mt - 1) / (16 * mt)) * ((w.rows + kBN - 1) / kBN);
  a.splits = k_splits(blocks, device_sms(), w.cols / kKB, n, w.rows, partials, partial_floats);
  if (a.splits > 1) a.out = partials;
  if (mt == 2)
    launch<2>(a, stream);
  else
    launch<4>(a, stream);
  if (a.splits > 1) sum_splits(partials, a.splits, n * w.rows, y, stream);
}

}  // namespace

bool fp8_mma_grouped_supports(const DeviceMatrix& w, int groups) {
  return fp8_mma_supports(w) && groups >= 1 && w.rows % groups == 0 &&
         (groups == 1 || (w.rows / groups) % kBN == 0);
}

void fp8_mma(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t n, float* y, float* partials,
             int64_t partial_floats, cudaStream_t stream) {
  run(w, 1, x, n, y, partials, partial_floats, stream);
}

void fp8_mma_grouped(const DeviceMatrix& w, int groups, const __nv_bfloat16* x, int64_t n, float* y,
                     float* partials, int64_t partial_floats, cudaStream_t stream) {
  run(w, groups, x, n, y, partials, partial_floats, stream);
}

}  // namespace deepinfer::cuda

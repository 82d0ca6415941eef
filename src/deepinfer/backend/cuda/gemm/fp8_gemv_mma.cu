// fp8_gemv_mma.h's kernel. A block is 8 warps over 8 / ks groups of 16 of W's rows, ks warps a
// group, each summing its ks-th of k (whole 128-k chunks); the first adds the others' sums in
// warp order. grid.y: passes of 8 rows of x (16 in two tiles where K <= 4096). No shared-memory
// copy of the weights: each lane loads its 16-byte words straight into registers, kAhead chunks
// ahead of the one it multiplies, the first ones before the PDL wait (weights only), beside the
// kernel ahead.
//
// The k map: thread t (= lane % 4) takes bytes [32t, 32t + 32) of each chunk of its rows g and
// g + 8, eight 32-bit words; mma step s gives its k positions {2t, 2t + 1} the actual k
// 32t + 4s + {0, 2} and {2t + 8, 2t + 9} 32t + 4s + {1, 3}: word s's even and odd bytes, which
// e4m3_pairs turns into bf16x2 with masks and shifts. x follows the map: staged in shared memory
// in fragment order, so a thread's 8 steps of a chunk are 64 contiguous bytes.
//
// E4M3 byte -> bf16: its sign to bit 15 and its other 7 bits to bits 4..10 read as the value
// times 2^-120 (E4M3's subnormals land on bf16's, which have the same shape); one multiply by
// 2^120 makes the exact value. Each product with x is then exact in fp32, as in weight_gemv.
// 128-wide blocks: the chunk's block scale multiplies the chunk's sum once instead of each weight
// (a power of two in the checkpoints, so that too is exact unless it underflows). 32- and
// 64-wide blocks (V4.1): a lane's 32 k lie in one block, so its power-of-two scale joins the
// multiply (2^120 * s, or 2^120 then s where that would overflow bf16).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/gemm/fp8_fragments.cuh"
#include "deepinfer/backend/cuda/gemm/fp8_gemv_mma.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/mma_sync.cuh"
#include "deepinfer/backend/cuda/reduce.cuh"
#include "deepinfer/backend/cuda/smem_limit.h"

namespace deepinfer::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kChunk = 128;  // k per chunk: one block scale's, or (32, 64) a lane's one
constexpr int kTokens = 8;   // rows of x a pass: the mma's n
// Chunks a lane holds, 64 bytes each: it multiplies one while the others are in flight, then asks
// for the next into the registers it freed. 3: 4 KB a warp asked for while it multiplies, at
// under 128 registers (two blocks an SM); 5 took 128 with 500 bytes of spills.
#ifndef GEMV_MMA_AHEAD
#define GEMV_MMA_AHEAD 3
#endif
constexpr int kAhead = GEMV_MMA_AHEAD;
// Warps a launch wants before k is split: about 16 an SM of an H100 or H200.
constexpr int64_t kWantWarps = 2048;
constexpr uint32_t kTwo120 = 0x7B807B80u;  // bf16x2 (2^120, 2^120)
// Shared memory up to which a pass takes 16 rows of x: K <= 4096 (132 KB there, one block an
// SM; K <= 2048 keeps two).
constexpr int64_t kTwoTileSmem = 140 * 1024;

// fp8_fragments.cuh's arguments: out is y; x_stride the rows of x apart (ldx); splits the warps
// that share a group of 16 rows' k (k_splits below).
using Args = Fp8GemmArgs;

// Word s of a chunk's 32 bytes -> A fragments: its bytes 0 and 2 (`even`, k 2t and 2t + 1 of
// step s) and 1 and 3 (`odd`, k 2t + 8 and 2t + 9), each pair the lower byte in the lower half.
__device__ inline uint32_t raw_pair(uint32_t v) {  // bytes 1 and 3 -> bf16x2 times 2^-120
  return (v & 0x80008000u) | ((v >> 4) & 0x07F007F0u);
}
// f: the factor that makes a raw pair the weights (2^120, or 2^120 times a lane's power-of-two
// block scale); kTwice: then times f2 too (a scale that 2^120 times it would overflow).
template <bool kTwice = false>
__device__ inline void e4m3_pairs(uint32_t v, uint32_t f, uint32_t f2, uint32_t& even,
                                  uint32_t& odd) {
  even = mul_bf16x2(raw_pair(v << 8), f);
  odd = mul_bf16x2(raw_pair(v), f);
  if (kTwice) {
    even = mul_bf16x2(even, f2);
    odd = mul_bf16x2(odd, f2);
  }
}

// A power-of-two fp32 scale's exponent field, and the bf16x2 factors the lane-scale path takes:
// 2^120 * s in one where that is a normal bf16 (s up to 2^7, not subnormal), else 2^120 then s.
__device__ inline uint32_t exponent_of(float s) { return (__float_as_uint(s) >> 23) & 0xffu; }
__device__ inline bool one_factor(float s) {
  const uint32_t e = exponent_of(s);
  return e >= 1 && e + 120 <= 254;
}
__device__ inline uint32_t bf16x2_of(uint32_t half) { return half | (half << 16); }

__device__ inline uint32_t word_of(const uint4& q, int i) {
  return i == 0 ? q.x : i == 1 ? q.y : i == 2 ? q.z : q.w;
}

// One chunk of this lane's two rows: 32 bytes each, and the rows' block scales.
struct Chunk {
  uint4 w[2][2];
  float s[2];
};
struct Ring {
  Chunk c[kAhead];
};

// The lane's view of its rows from its share's first chunk: the lane's first byte of each row
// and each row's first scale for the lane's k; a chunk's is scale_step further (128 / block_cols).
struct Lane {
  const uint8_t* w[2];
  const float* s[2];
  int scale_step;
};

__device__ inline Chunk load_chunk(const Lane& l, int c) {
  Chunk k;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint4* p = reinterpret_cast<const uint4*>(l.w[h] + c * kChunk);
    k.w[h][0] = __ldg(p);
    k.w[h][1] = __ldg(p + 1);
    k.s[h] = __ldg(l.s[h] + c * l.scale_step);
  }
  return k;
}

// x rows [p0, p0 + rn) (from column x0 of each) into shared memory in fragment order: chunk c,
// thread t, step s's (b0, b1) at staged_offset(c, s / 2, t) + (s % 2) * 8 of the row.
__device__ inline void stage_x(const Args& a, const __nv_bfloat16* x, int rn, uint8_t* xs) {
  const int quads = static_cast<int>(a.K / 4);
  const int64_t row_bytes = staged_row_bytes(a.K);
#pragma unroll 4
  for (int i = threadIdx.x; i < rn * quads; i += kThreads) {
    const int j = i / quads, k = 4 * (i - j * quads);
    const uint2 v = *reinterpret_cast<const uint2*>(x + j * a.x_stride + k);
    const int c = k / kChunk, t = (k % kChunk) / 32, s = (k % 32) / 4;
    // b0 = (k, k + 2), b1 = (k + 1, k + 3): the even and odd bytes' activations.
    const uint2 o = make_uint2(__byte_perm(v.x, v.y, 0x5410), __byte_perm(v.x, v.y, 0x7632));
    *reinterpret_cast<uint2*>(xs + j * row_bytes + staged_offset(c, s >> 1, t) + (s & 1) * 8) = o;
  }
}

// Where a warp's lane starts: its share of k, its two rows, and its first kAhead chunks asked
// for (weights only: before the PDL wait).
struct Start {
  Lane l;
  Ring ring;
  int64_t row[2];
  int share, mine, c_first;
};
__device__ inline Start start(const Args& a) {
  Start st;
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  st.share = warp % a.splits;
  const int64_t r16 = int64_t{blockIdx.x} * (kWarps / a.splits) + warp / a.splits;
  st.row[0] = r16 * 16 + g;
  st.row[1] = r16 * 16 + g + 8;
  st.mine = static_cast<int>(a.K / kChunk) / a.splits;
  st.c_first = st.share * st.mine;
  const int scale_shift = __ffs(a.block_cols) - 1;  // block_cols is 32, 64 or 128
  st.l.scale_step = kChunk >> scale_shift;
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // rows past the matrix read its last row and store nothing
    const int64_t r = st.row[h] < a.N ? st.row[h] : a.N - 1;
    st.l.w[h] = a.w + r * a.K + int64_t{st.c_first} * kChunk + 32 * t;
    st.l.s[h] = a.scale + ((a.row0 + r) / a.block_rows) * a.scale_cols +
                ((st.c_first * kChunk + 32 * t) >> scale_shift);
  }
#pragma unroll
  for (int u = 0; u < kAhead; ++u) st.ring.c[u] = u < st.mine ? load_chunk(st.l, u) : Chunk{};
  return st;
}

// A chunk's mma steps into sums (f[h], f2[h]: row h's factors, e4m3_pairs').
template <int kTiles, bool kTwice>
__device__ inline void chunk_sums(const Chunk& cur, const uint8_t* xs, int xc, int row_bytes,
                                  int rn, const uint32_t (&f)[2], const uint32_t (&f2)[2],
                                  float (&sums)[kTiles][4]) {
  const int g = (threadIdx.x & 31) >> 2;
#pragma unroll
  for (int q = 0; q < 4; ++q) {  // steps 2q, 2q + 1
    uint4 xq[kTiles];            // x rows g (+ 8) of the pass; rows past rn are zeros
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
      xq[j] = 8 * j + g < rn ? *reinterpret_cast<const uint4*>(
                                   &xs[xc + 8 * j * row_bytes + staged_offset(0, q, 0)])
                             : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int s = 2 * q + e;
      uint32_t af[4];  // a0: row g, k 2t..; a1: row g + 8; a2, a3: the same at k 2t + 8..
      e4m3_pairs<kTwice>(word_of(cur.w[0][s >> 2], s & 3), f[0], f2[0], af[0], af[2]);
      e4m3_pairs<kTwice>(word_of(cur.w[1][s >> 2], s & 3), f[1], f2[1], af[1], af[3]);
#pragma unroll
      for (int j = 0; j < kTiles; ++j)
        mma_bf16_16816(sums[j], af, e ? xq[j].z : xq[j].x, e ? xq[j].w : xq[j].y);
    }
  }
}

// kTiles n8 tiles of x rows a pass (1 or 2): both multiply each expanded A fragment, so a pass
// of 16 rows reads and expands the weights once (a column of an mma's product depends only on
// its own column of B, so a row's bits do not depend on the tile or position it takes).
// kLaneScale: block_cols 32 or 64 with power-of-two scales, each lane's pairs taking its own
// scale in their multiply (a chunk's mma steps then chain straight into the row's sums).
template <int kTiles, bool kLaneScale>
__global__ void __launch_bounds__(kThreads, 2) fp8_gemv_mma_kernel(Args a) {
  const auto st = pdl_grid_begin([&] { return start(a); });
  extern __shared__ __align__(16) uint8_t xs[];
  __shared__ float red[kWarps][4 * kTiles][32];
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int share = st.share, mine = st.mine;
  const Lane& l = st.l;
  const int64_t p0 = int64_t{blockIdx.y} * kTokens * kTiles;
  const int rn = static_cast<int>(std::min<int64_t>(kTokens * kTiles, a.n - p0));
  const int64_t block_row = int64_t{blockIdx.x} * (kWarps / a.splits) * 16;
  const int64_t x0 = a.group_rows ? block_row / a.group_rows * a.K : 0;
  stage_x(a, a.x + p0 * a.x_stride + x0, rn, xs);
  __syncthreads();

  Ring ring = st.ring;
  float acc[kTiles][4] = {};
  const int row_bytes = static_cast<int>(staged_row_bytes(a.K));
  const int xrow = g * row_bytes + staged_offset(st.c_first, 0, t);
  for (int c0 = 0; c0 < mine; c0 += kAhead) {
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int c = c0 + u;
      if (c >= mine) break;
      const Chunk& cur = ring.c[u];
      const int xc = xrow + staged_offset(c, 0, 0);
      if constexpr (kLaneScale) {
        // A warp-uniform branch: 2^120 * s in one factor for the checkpoints' scales.
        if (__all_sync(0xffffffffu, one_factor(cur.s[0]) && one_factor(cur.s[1]))) {
          const uint32_t f[2] = {bf16x2_of((exponent_of(cur.s[0]) + 120) << 7),
                                 bf16x2_of((exponent_of(cur.s[1]) + 120) << 7)};
          chunk_sums<kTiles, false>(cur, xs, xc, row_bytes, rn, f, f, acc);
        } else {
          const uint32_t f[2] = {kTwo120, kTwo120};
          const uint32_t f2[2] = {bf16x2_of(__float_as_uint(cur.s[0]) >> 16),
                                  bf16x2_of(__float_as_uint(cur.s[1]) >> 16)};
          chunk_sums<kTiles, true>(cur, xs, xc, row_bytes, rn, f, f2, acc);
        }
      } else {
        const uint32_t f[2] = {kTwo120, kTwo120};
        float part[kTiles][4] = {};
        chunk_sums<kTiles, false>(cur, xs, xc, row_bytes, rn, f, f, part);
        // c0, c1: row g, x rows 2t, 2t + 1 of the tile; c2, c3: row g + 8.
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
          acc[j][0] = fmaf(cur.s[0], part[j][0], acc[j][0]);
          acc[j][1] = fmaf(cur.s[0], part[j][1], acc[j][1]);
          acc[j][2] = fmaf(cur.s[1], part[j][2], acc[j][2]);
          acc[j][3] = fmaf(cur.s[1], part[j][3], acc[j][3]);
        }
      }
      if (c + kAhead < mine) ring.c[u] = load_chunk(l, c + kAhead);  // into the freed registers
    }
  }
  if (a.splits > 1) add_k_shares(reinterpret_cast<float(&)[4 * kTiles]>(acc), red, share, a.splits);
  if (share != 0) return;
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int r = 8 * j + 2 * t + e;
        if (st.row[h] < a.N && r < rn) a.out[(p0 + r) * a.N + st.row[h]] = acc[j][2 * h + e];
      }
}

template <int kTiles, bool kLaneScale>
SmemLimit& limit_of() {
  static SmemLimit limit(reinterpret_cast<const void*>(fp8_gemv_mma_kernel<kTiles, kLaneScale>));
  return limit;
}

template <int kTiles, bool kLaneScale>
void launch(const Args& a, dim3 grid, size_t smem, cudaStream_t stream) {
  limit_of<kTiles, kLaneScale>().ensure(smem);
  launch_kernel(fp8_gemv_mma_kernel<kTiles, kLaneScale>, grid, kThreads, smem, stream, a);
}

// Warps a group of 16 rows (a power of two up to kWarps, each a whole number of chunks): enough
// warps for the GPU, and (groups > 1) a block's rows inside one group. 0: no such split. By
// shape alone, so a row's sums do not depend on n.
int k_splits(const DeviceMatrix& w, int groups) {
  const int64_t chunks = w.cols / kChunk, row16 = (w.rows + 15) / 16;
  const auto fits_groups = [&](int ks) {
    return groups == 1 || (w.rows / groups) % (16 * (kWarps / ks)) == 0;
  };
  int ks = 1;
  while (ks < kWarps && chunks % (2 * ks) == 0 && (row16 * ks < kWantWarps || !fits_groups(ks)))
    ks *= 2;
  return fits_groups(ks) && chunks % ks == 0 ? ks : 0;
}

}  // namespace

bool fp8_gemv_mma_supports(const DeviceMatrix& w, int groups) {
  return w.format == MatrixFormat::kFp8Block && w.data && w.block_scale && w.rows > 0 &&
         w.cols > 0 && w.cols % kChunk == 0 && w.block_rows > 0 &&
         (w.block_cols == kChunk ||
          ((w.block_cols == 32 || w.block_cols == 64) && w.pow2_scales)) &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && groups >= 1 && w.rows % groups == 0 &&
         k_splits(w, groups) > 0;
}

void fp8_gemv_mma(const DeviceMatrix& w, int groups, const __nv_bfloat16* x, int64_t ldx, int64_t n,
                  float* y, cudaStream_t stream) {
  if (!fp8_gemv_mma_supports(w, groups) || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      ldx % 8 != 0 || ldx < groups * w.cols) {
    std::fprintf(stderr,
                 "fp8_gemv_mma: unsupported operands (rows %lld, cols %lld, format %d, block "
                 "%dx%d, %d groups, ldx %lld)\n",
                 static_cast<long long>(w.rows), static_cast<long long>(w.cols),
                 static_cast<int>(w.format), w.block_rows, w.block_cols, groups,
                 static_cast<long long>(ldx));
    std::abort();
  }
  if (n == 0) return;
  Args a = fp8_gemm_args(w, groups, x, n, y);
  a.x_stride = ldx;
  a.splits = k_splits(w, groups);
  const int64_t row16 = (w.rows + 15) / 16, groups_a_block = kWarps / a.splits;
  // Two tiles (16 rows a pass) past 8 rows where their staged rows fit.
  const bool two = n > kTokens && 2 * kTokens * staged_row_bytes(w.cols) <= kTwoTileSmem;
  const int64_t per_pass = two ? 2 * kTokens : kTokens;
  const dim3 grid(static_cast<unsigned>((row16 + groups_a_block - 1) / groups_a_block),
                  static_cast<unsigned>((n + per_pass - 1) / per_pass));
  const size_t smem = static_cast<size_t>(std::min(n, per_pass) * staged_row_bytes(w.cols));
  const bool lane_scale = w.block_cols != kChunk;
  if (two)
    lane_scale ? launch<2, true>(a, grid, smem, stream) : launch<2, false>(a, grid, smem, stream);
  else
    lane_scale ? launch<1, true>(a, grid, smem, stream) : launch<1, false>(a, grid, smem, stream);
}

}  // namespace deepinfer::cuda

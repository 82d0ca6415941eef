// W8A16 on warpgroup tensor cores (fp8_wgmma.h). Roles: y^T = W x^T. A block takes 128 rows of W
// (two warpgroups of 64, a warp 16: wgmma's A, expanded from the stored bytes in registers) and a
// pass of R = 64 NB rows of x (wgmma's B, NB m64n64k16 products a k16 step, read by the hardware
// from shared memory), and walks its split of K in 128-wide tiles: weights and rows copied by
// cp.async kAhead tiles ahead, K-major under the 128-byte swizzle.
//
// The k order is natural on both sides, so x is copied as it is. A thread's A fragment of a k16
// step wants weight bytes 2t, 2t + 1, 2t + 8, 2t + 9 of its rows' 16-byte chunk: two 4-byte
// loads and a byte permute a row (the chunks are swizzled by row, so the warp's loads hit 16
// banks, the quad's pairs as broadcasts). Each wgmma group is committed and the warps wait for
// the one before it, so step s + 1's weights expand while step s multiplies.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "deepinfer/backend/cuda/gemm/fp8_fragments.cuh"
#include "deepinfer/backend/cuda/gemm/fp8_wgmma.h"
#include "deepinfer/backend/cuda/gemm/split_k.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/smem_limit.h"
#include "deepinfer/backend/cuda/wgmma.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kThreads = 256;  // two warpgroups
constexpr int kBN = 128;       // rows of W a block
constexpr int kKB = 128;       // k a tile
// Four stages, the copies two tiles ahead: the stage a copy overwrites was last read by the tile
// before the previous one, whose wgmma groups have retired (at most one runs on past a tile).
#ifndef FP8_WGMMA_STAGES
#define FP8_WGMMA_STAGES 4
#endif
constexpr int kStages = FP8_WGMMA_STAGES;
// 1: step s + 1's fragments expand while step s's wgmma runs, before the wait for step s - 1
// (ptxas keeps an in-flight wgmma's A registers); 0: after that wait. A variant to time.
#ifndef FP8_WGMMA_EARLY_EXPAND
#define FP8_WGMMA_EARLY_EXPAND 0
#endif
constexpr bool kEarlyExpand = FP8_WGMMA_EARLY_EXPAND != 0;
// Split K within one wave (0: at least one wave, fp8_mma's rule; a variant to time).
#ifndef FP8_WGMMA_WITHIN_WAVE
#define FP8_WGMMA_WITHIN_WAVE 1
#endif
constexpr int kAhead = kStages - 2;
static_assert(kStages >= 4);

using Args = Fp8GemmArgs;

// One stage, offsets into the 1024-byte aligned dynamic shared memory: x's rows as two halves
// (k 0..63, 64..127) of [R][128 B], then W's rows [128][128 B], 16-byte chunks swizzled by row.
template <int NB>
struct Stage {
  static constexpr int kR = 64 * NB;
  static constexpr int kHalf = kR * 128;
  static constexpr int kX = 2 * kHalf;
  static constexpr int kW = kBN * kKB;
  static constexpr int kBytes = (kX + kW + 1023) / 1024 * 1024;
};
// The epilogue stages the output tile [R][128] fp32 in the stages' memory, rows padded.
constexpr int kOutStride = kBN * 4 + 16;
template <int NB>
constexpr size_t smem_of() {
  constexpr int kBytes = Stage<NB>::kBytes * kStages;
  static_assert(Stage<NB>::kR * kOutStride <= kBytes);
  return size_t{kBytes} + 1024;  // + the alignment slack
}

__device__ inline uint32_t lds32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// Where a block stands: its pass of x (rows m0 .. m0 + rn), its 128 rows of W from n0, its split
// of K (tiles from k tile `first`), its aligned shared memory.
template <int NB>
struct Place {
  uint8_t* sm;
  int64_t m0, n0, kfirst;
  int rn, tiles;
  __device__ Place(const Args& a, uint8_t* raw) {
    sm = raw + ((1024 - (shared_addr(raw) & 1023)) & 1023);
    m0 = int64_t{blockIdx.x} * Stage<NB>::kR;
    n0 = int64_t{blockIdx.y} * kBN;
    rn = static_cast<int>(std::min<int64_t>(Stage<NB>::kR, a.n - m0));
    const int all = static_cast<int>(a.K / kKB), z = static_cast<int>(blockIdx.z);
    const int first = all * z / a.splits;
    tiles = all * (z + 1) / a.splits - first;
    kfirst = int64_t{first} * kKB;
  }
};

// Copies W's 128 rows of k tile `tile` (of the split) into its stage: this thread's chunks are
// row q / 8, chunk q % 8 for q = tid + 256 i. Every row exists (rows a multiple of 128).
template <int NB>
__device__ inline void load_w(const Args& a, const Place<NB>& p, int tile) {
  uint8_t* st = p.sm + (tile % kStages) * Stage<NB>::kBytes + Stage<NB>::kX;
  const uint8_t* src = a.w + p.n0 * a.K + p.kfirst + int64_t{tile} * kKB;
#pragma unroll
  for (int i = 0; i < kBN * 8 / kThreads; ++i) {
    const int q = threadIdx.x + kThreads * i, row = q >> 3, c = q & 7;
    cp_async16(st + row * kKB + ((c ^ (row & 7)) << 4), src + row * a.K + 16 * c);
  }
}

extern __shared__ uint8_t fw_sm_raw[];

template <int NB>
__global__ void __launch_bounds__(kThreads, 1) fp8_wgmma_kernel(Args a) {
  // The weights are never written while the model runs: their first tiles are asked for before
  // the previous kernel has finished.
  pdl_grid_begin([&] {
    const Place<NB> p(a, fw_sm_raw);
#pragma unroll
    for (int s = 0; s < kAhead; ++s)
      if (s < p.tiles) load_w(a, p, s);
  });
  using St = Stage<NB>;
  constexpr int R = St::kR;
  const Place<NB> p(a, fw_sm_raw);
  uint8_t* sm = p.sm;
  const int64_t m0 = p.m0, n0 = p.n0, kfirst = p.kfirst;
  const int rn = p.rn, tiles = p.tiles, z = static_cast<int>(blockIdx.z);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;

  // This thread's copies of x a stage: row q / 16, chunk q % 16 for q = tid + 256 i (rows past n
  // read zeros).
  constexpr int kXc = R * 16 / kThreads;
  const __nv_bfloat16* x = a.x + (a.group_rows ? n0 / a.group_rows * a.K : 0) + kfirst;
  const __nv_bfloat16* xsrc[kXc];
  int xdst[kXc];
  bool xok[kXc];
#pragma unroll
  for (int i = 0; i < kXc; ++i) {
    const int q = tid + kThreads * i, r = q >> 4, c = q & 15;
    xok[i] = r < rn;
    xsrc[i] = x + (m0 + (xok[i] ? r : 0)) * a.x_stride + 8 * c;
    xdst[i] = (c >> 3) * St::kHalf + r * 128 + (((c & 7) ^ (r & 7)) << 4);
  }
  const auto load_x = [&](int tile) {
    uint8_t* st = sm + (tile % kStages) * St::kBytes;
#pragma unroll
    for (int i = 0; i < kXc; ++i) cp_async16(st + xdst[i], xsrc[i] + int64_t{tile} * kKB, xok[i]);
  };

  // This thread's A rows (local lrow and lrow + 8) and their scale rows.
  const int lrow = (warp >> 2) * 64 + (warp & 3) * 16 + g;
  const float* srow[2];
#pragma unroll
  for (int h = 0; h < 2; ++h)
    srow[h] = a.scale + ((a.row0 + n0 + lrow + 8 * h) / a.block_rows) * a.scale_cols;

#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < tiles) load_x(s);
    cp_async_commit();
  }

  float acc[NB][32];
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[b][i] = 0.0f;
  const int m32 = a.block_cols >> 5;  // 4 in V4's 128-wide blocks, 1 in V4.1's 32-wide ones
  // Bytes 2t, 2t + 1 of one word and of the word 8 bytes on: t's half of each.
  const uint32_t sel = (t & 1) ? 0x7632u : 0x5410u;
  const int woff = St::kX + lrow * kKB + 4 * (t >> 1);
  for (int tile = 0; tile < tiles; ++tile) {
    // The scales of this tile's four 32-wide k blocks, for both rows (block_cols = 32 m).
    const int k32 = static_cast<int>((kfirst >> 5) + 4 * tile);
    float sc[2][4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int kb = m32 == 4 ? (k32 + q) >> 2 : m32 == 1 ? k32 + q : (k32 + q) / m32;
#pragma unroll
      for (int h = 0; h < 2; ++h) sc[h][q] = __ldg(srow[h] + kb);
    }
    cp_async_wait<kAhead - 1>();
    fence_async_shared();
    __syncthreads();
    if (tile + kAhead < tiles) {
      load_w(a, p, tile + kAhead);
      load_x(tile + kAhead);
    }
    cp_async_commit();
    const uint8_t* st = sm + (tile % kStages) * St::kBytes;
    const uint32_t xs = shared_addr(st);
    // Step s's four weight words (rows lrow and lrow + 8 share their swizzle: row % 8 == g),
    // loaded a step ahead: the wgmma fences order shared loads, so this puts them before the
    // previous step's wgmma and its wait.
    uint32_t raw[4];
    const auto fetch = [&](int s) {
      const uint8_t* p0 = st + woff + ((s ^ g) << 4);
      raw[0] = lds32(p0);
      raw[1] = lds32(p0 + 8);
      raw[2] = lds32(p0 + 8 * kKB);
      raw[3] = lds32(p0 + 8 * kKB + 8);
    };
    fetch(0);
    uint32_t fa[4];
    const auto expand = [&](int s) {
      const uint32_t w0 = __byte_perm(raw[0], raw[1], sel);
      const uint32_t w1 = __byte_perm(raw[2], raw[3], sel);
      if (s < 7) fetch(s + 1);
      expand_fp8x4(w0, sc[0][s >> 1], fa[0], fa[2]);
      expand_fp8x4(w1, sc[1][s >> 1], fa[1], fa[3]);
    };
    if (kEarlyExpand) expand(0);
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      if (!kEarlyExpand) expand(s);
      wgmma_fence();
#pragma unroll
      for (int b = 0; b < NB; ++b)
        wgmma_m64n64k16_rs(
            acc[b], fa, wgmma_desc_k128(xs + (s >> 2) * St::kHalf + b * 64 * 128 + (s & 3) * 32));
      wgmma_commit();
      if (kEarlyExpand && s < 7) expand(s + 1);
      wgmma_wait<1>();  // the step before is done: its fragments' registers are free
    }
  }
  wgmma_wait<0>();
#pragma unroll
  for (int b = 0; b < NB; ++b) wgmma_pin(acc[b]);
  cp_async_wait<0>();
  __syncthreads();  // every stage is free: the output tile is staged there

  // acc[b][4i + 2hr + c] is (row b * 64 + 8i + 2t + c of x, W row lrow + 8 hr).
#pragma unroll
  for (int b = 0; b < NB; ++b)
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int c = 0; c < 2; ++c)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr)
          reinterpret_cast<float*>(sm + (b * 64 + 8 * i + 2 * t + c) * kOutStride)[lrow + 8 * hr] =
              acc[b][4 * i + 2 * hr + c];
  __syncthreads();
  float* out = a.out + int64_t{z} * a.n * a.N + m0 * a.N + n0;
  constexpr int kChunks = kBN * 4 / 16;  // 16-byte chunks of an output row
#pragma unroll
  for (int i = 0; i < R * kChunks / kThreads; ++i) {
    const int q = tid + kThreads * i, r = q / kChunks, ch = q % kChunks;
    if (r < rn)
      *reinterpret_cast<uint4*>(out + r * a.N + 4 * ch) =
          *reinterpret_cast<const uint4*>(sm + r * kOutStride + 16 * ch);
  }
}

template <int NB>
void launch(const Args& a, cudaStream_t stream) {
  static SmemLimit limit(reinterpret_cast<const void*>(fp8_wgmma_kernel<NB>));
  limit.ensure(smem_of<NB>());
  const dim3 grid(static_cast<unsigned>((a.n + 64 * NB - 1) / (64 * NB)),
                  static_cast<unsigned>(a.N / kBN), static_cast<unsigned>(a.splits));
  launch_kernel(fp8_wgmma_kernel<NB>, grid, kThreads, smem_of<NB>(), stream, a);
}

}  // namespace

bool fp8_wgmma_supports(const DeviceMatrix& w, int groups) {
  return w.format == MatrixFormat::kFp8Block && w.data && w.block_scale && w.cols > 0 &&
         w.cols % kKB == 0 && w.block_cols > 0 && w.block_cols % 32 == 0 && w.block_rows > 0 &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && groups >= 1 && w.rows > 0 &&
         w.rows % groups == 0 && (w.rows / groups) % kBN == 0;
}

void fp8_wgmma(const DeviceMatrix& w, int groups, const __nv_bfloat16* x, int64_t n, float* y,
               float* partials, int64_t partial_floats, cudaStream_t stream) {
  if (n == 0) return;
  if (!fp8_wgmma_supports(w, groups) || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(y) % 16 != 0) {
    std::fprintf(stderr,
                 "fp8_wgmma: needs FP8 block-scaled weights with cols a multiple of %d, "
                 "block_cols a multiple of 32, each of %d groups' rows a multiple of %d, data, "
                 "x and y 16-byte aligned (got format %d, %lld x %lld, block %d x %d)\n",
                 kKB, groups, kBN, static_cast<int>(w.format), static_cast<long long>(w.rows),
                 static_cast<long long>(w.cols), w.block_rows, w.block_cols);
    std::abort();
  }
  const int nb = n <= 64 ? 1 : 2;
  Fp8GemmArgs a = fp8_gemm_args(w, groups, x, n, y);
  // One block an SM (its stages fill the shared memory): a shorter grid splits K into as many
  // parts as one wave holds (wo_b at 128 rows: 32 blocks, 4 parts, not 5 and a second wave).
  const int64_t blocks = ((n + 64 * nb - 1) / (64 * nb)) * (w.rows / kBN);
  a.splits = k_splits(blocks, device_sms(), w.cols / kKB, n, w.rows, partials, partial_floats,
                      /*within_wave=*/FP8_WGMMA_WITHIN_WAVE != 0);
  if (a.splits > 1) a.out = partials;
  if (nb == 1)
    launch<1>(a, stream);
  else
    launch<2>(a, stream);
  if (a.splits > 1) sum_splits(partials, a.splits, n * w.rows, y, stream);
}

}  // namespace deepinfer::cuda

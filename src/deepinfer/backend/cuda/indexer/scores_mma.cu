// Block: one query and kTileEntries entries; warp w owns entries 16w..16w+15 (the mma's M) against
// every head (N, 8 a tile), walking head_dim (K) 8 at a time. q and the entries' keys are staged
// in shared memory, rows padded to a stride of 4 mod 32 floats, so a fragment's 32 loads (rows
// g, columns t) fall in 32 different banks. Heads and dims past the real ones are zeros, which
// add nothing to a dot product or (weight 0) to the sum over heads.
#include <cstdint>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/indexer/scores_mma.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/mma_sync.cuh"
#include "deepinfer/backend/cuda/smem_limit.h"

namespace deepinfer::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileEntries = 16 * kWarps;
constexpr int kMaxHeads = 64, kMaxDim = 128;

__host__ __device__ inline int round8(int x) { return (x + 7) / 8 * 8; }
__host__ __device__ inline int row_stride(int dim) { return round8(dim) + 4; }

// Row src (dim floats) into dst, zeros up to round8(dim); one warp, 16-byte asynchronous copies
// where aligned (every row's in flight at once: cp_async_wait_all before reading).
__device__ inline void stage_row(float* dst, const float* src, int dim, int lane) {
  const int padded = round8(dim);
  if (dim % 4 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0) {
    for (int c = 4 * lane; c < dim; c += 128) cp_async16(dst + c, src + c);
    for (int c = dim + lane; c < padded; c += 32) dst[c] = 0.0f;
  } else {
    for (int c = lane; c < padded; c += 32) dst[c] = c < dim ? src[c] : 0.0f;
  }
}

__device__ inline void zero_row(float* dst, int dim, int lane) {
  for (int c = lane; c < round8(dim); c += 32) dst[c] = 0.0f;
}

__global__ void __launch_bounds__(kThreads) scores_mma_kernel(IndexerArgs a, float* scores) {
  pdl_grid_begin();
  extern __shared__ __align__(16) float sm[];
  const int nh = a.num_heads, hd = a.head_dim, heads8 = round8(nh), ld = row_stride(hd);
  float* qs = sm;                      // [heads8][ld]
  float* ks = qs + heads8 * ld;        // [kTileEntries][ld]
  float* ws = ks + kTileEntries * ld;  // [heads8]: w * weight_scale, 0 past the real heads
  const int64_t t = blockIdx.x;
  int64_t seq, visible;
  a.query_view(t, seq, visible);
  const int64_t e0 = int64_t{blockIdx.y} * kTileEntries;
  if (e0 >= visible) return;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;

  const float* q = a.q + t * nh * hd;
  for (int h = warp; h < heads8; h += kWarps) {
    if (h < nh)
      stage_row(qs + h * ld, q + int64_t{h} * hd, hd, lane);
    else
      zero_row(qs + h * ld, hd, lane);
  }
  for (int h = tid; h < heads8; h += kThreads)
    ws[h] = h < nh ? a.w[t * nh + h] * a.weight_scale : 0.0f;
#pragma unroll 4
  for (int r = warp; r < kTileEntries; r += kWarps) {
    if (e0 + r < visible)  // entries this query can't see stay zero: their pages may not exist
      stage_row(ks + r * ld, a.keys.entry(seq, e0 + r), hd, lane);
    else
      zero_row(ks + r * ld, hd, lane);
  }
  cp_async_wait_all();
  __syncthreads();

  const int ntiles = heads8 / 8;
  float acc[kMaxHeads / 8][4] = {};
  const float* a_g = ks + (warp * 16 + g) * ld + tq;  // A rows g and g + 8, column t
  const float* a_g8 = a_g + 8 * ld;
  const float* b_row = qs + g * ld + tq;  // B column g (head nt * 8 + g), row t
  for (int k0 = 0; k0 < round8(hd); k0 += 8) {
    const Tf32Pair x0 = split_tf32(a_g[k0]), x1 = split_tf32(a_g8[k0]),
                   x2 = split_tf32(a_g[k0 + 4]), x3 = split_tf32(a_g8[k0 + 4]);
    const uint32_t big[4] = {x0.big, x1.big, x2.big, x3.big};
    const uint32_t small[4] = {x0.small, x1.small, x2.small, x3.small};
#pragma unroll
    for (int nt = 0; nt < kMaxHeads / 8; ++nt) {
      if (nt >= ntiles) break;
      const float* b = b_row + nt * 8 * ld + k0;
      const Tf32Pair y0 = split_tf32(b[0]), y1 = split_tf32(b[4]);
      // The small products first, so they are not lost against the big one.
      mma_tf32_1688(acc[nt], small, y0.big, y1.big);
      mma_tf32_1688(acc[nt], big, y0.small, y1.small);
      mma_tf32_1688(acc[nt], big, y0.big, y1.big);
    }
  }

  // c0, c1: entry g, heads 2t, 2t + 1 of the tile; c2, c3: entry g + 8. Each lane sums its heads,
  // then the quad adds its four partial sums (a fixed order: the same bits in every launch).
  float s[2] = {0.0f, 0.0f};
#pragma unroll
  for (int nt = 0; nt < kMaxHeads / 8; ++nt) {
    if (nt >= ntiles) break;
    const int h = nt * 8 + 2 * tq;
#pragma unroll
    for (int r = 0; r < 2; ++r)
      s[r] += ws[h] * (fmaxf(acc[nt][2 * r], 0.0f) * a.score_scale) +
              ws[h + 1] * (fmaxf(acc[nt][2 * r + 1], 0.0f) * a.score_scale);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    s[r] += __shfl_xor_sync(0xffffffffu, s[r], 1);
    s[r] += __shfl_xor_sync(0xffffffffu, s[r], 2);
    const int64_t e = e0 + warp * 16 + g + 8 * r;
    if (tq == 0 && e < visible) scores[t * a.num_entries + e] = s[r];
  }
}

}  // namespace

bool indexer_scores_mma_fits(const IndexerArgs& a) {
  return a.num_heads > 0 && a.num_heads <= kMaxHeads && a.head_dim > 0 && a.head_dim <= kMaxDim;
}

void indexer_scores_mma(const IndexerArgs& a, float* scores, cudaStream_t stream) {
  if (a.num_queries == 0 || a.num_entries == 0) return;
  const int heads8 = round8(a.num_heads), ld = row_stride(a.head_dim);
  const size_t smem = sizeof(float) * ((heads8 + kTileEntries) * ld + heads8);
  static SmemLimit limit(reinterpret_cast<const void*>(scores_mma_kernel));
  limit.ensure(smem);
  const dim3 grid(static_cast<unsigned>(a.num_queries),
                  static_cast<unsigned>((a.num_entries + kTileEntries - 1) / kTileEntries));
  launch_kernel(scores_mma_kernel, grid, kThreads, smem, stream, a, scores);
}

}  // namespace deepinfer::cuda

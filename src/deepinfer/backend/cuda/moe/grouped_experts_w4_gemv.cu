// Decode's MXFP4 experts at a few tokens (launch_grouped_w4's narrow case, outside batch
// invariance), in the form of gemm/fp8_gemv_mma.cu: the weights are the mma's A operand (16 of a
// matrix's rows a warp) and the expert's rows, at most 8, its B (n8). A lane loads its 16-byte
// words straight into registers, kAhead 128-k chunks ahead of the one it multiplies; no
// shared-memory copy of the weights, and no fragment loads or permutes for the 8 rows the
// activation side had as the A operand. ks warps split a column group's k (whole chunks), the
// first adding the others' sums in warp order.
//
// The k map is w4_fragments.cuh's: thread t (lane % 4) expands the bytes of k [32t, 32t + 32)
// of a chunk, word p in mma steps 2p and 2p + 1; step 2p + h's positions {2t, 2t + 1} are
// nibbles (2h, 2h + 4) of the word and {2t + 8, 2t + 9} nibbles (2h + 1, 2h + 5). That k block is
// one E8M0 scale's, so each lane's pairs take one factor (w4_fragments' first_factor, and the
// second for bytes past 128 in a warp-uniform branch). x is staged in shared memory in that
// order: a thread's 8 steps of a chunk are 64 contiguous bytes.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/mma_sync.cuh"
#include "deepinfer/backend/cuda/moe/expert_math.cuh"
#include "deepinfer/backend/cuda/moe/w4_fragments.cuh"
#include "deepinfer/backend/cuda/reduce.cuh"
#include "deepinfer/backend/cuda/smem_limit.h"

namespace deepinfer::cuda::moe_detail {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kChunk = 128;  // k per chunk
constexpr int kRows = 8;     // expert rows a pass: the mma's n
// Chunks a lane holds (64 bytes each for the gate-up's two matrices, 32 for the down): it
// multiplies one while the others are in flight, then asks for the next into the registers it
// freed.
#ifndef W4_GEMV_AHEAD
#define W4_GEMV_AHEAD 3
#endif
constexpr int kAhead = W4_GEMV_AHEAD;
// Chunks a warp's share of k keeps at least: splits of k (a power of two up to 4) give decode's
// few experts more warps, while each share stays long enough to keep chunks in flight.
constexpr int kMinChunksAShare = 8;

__host__ __device__ inline int k_splits(int64_t cols) {
  const int64_t chunks = cols / kChunk;
  int ks = 1;
  while (ks < 4 && chunks % (2 * ks) == 0 && chunks / (2 * ks) >= kMinChunksAShare) ks *= 2;
  return ks;
}

// One chunk of this lane's rows g and g + 8 of each matrix: 16 bytes and one E8M0 byte each.
template <int NW>
struct Chunk {
  uint4 w[NW][2];
  uint32_t sbytes;  // byte 2j + h: matrix j, row h's scale
};
template <int NW>
struct Ring {
  Chunk<NW> c[kAhead];
};

// The lane's first byte of its share of each row, and each row's first scale of that share.
template <int NW>
struct Lane {
  const uint8_t* w[NW][2];
  const uint8_t* s[NW][2];
};

template <int NW>
__device__ inline Chunk<NW> load_chunk(const Lane<NW>& l, int c) {
  Chunk<NW> k;
  k.sbytes = 0;
#pragma unroll
  for (int j = 0; j < NW; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      k.w[j][h] = __ldg(reinterpret_cast<const uint4*>(l.w[j][h] + c * (kChunk / 2)));
      k.sbytes |= uint32_t{__ldg(l.s[j][h] + c * (kChunk / 32))} << (8 * (2 * j + h));
    }
  return k;
}

// Rows [0, rn) of the pass (row r at row_of(r)) into shared memory in fragment order: chunk c,
// thread t, word p's steps (p, 0) and (p, 1) as (b0, b1, b0, b1) at staged_offset(c, p, t) of
// the row.
template <typename RowOf>
__device__ inline void stage_x(RowOf row_of, int rn, int64_t cols, uint8_t* xs) {
  const int octs = static_cast<int>(cols / 8);
  const int64_t row_bytes = staged_row_bytes(cols);
#pragma unroll 2
  for (int i = threadIdx.x; i < rn * octs; i += kThreads) {
    const int r = i / octs, k = 8 * (i - r * octs);
    const uint4 v = *reinterpret_cast<const uint4*>(row_of(r) + k);
    const int c = k / kChunk, t = (k % kChunk) / 32, p = (k % 32) / 8;
    // Values k..k+7 are v.x = (0, 1), .y = (2, 3), .z = (4, 5), .w = (6, 7): step h pairs
    // (2h, 2h + 4) and (2h + 1, 2h + 5).
    const uint4 o = make_uint4(__byte_perm(v.x, v.z, 0x5410), __byte_perm(v.x, v.z, 0x7632),
                               __byte_perm(v.y, v.w, 0x5410), __byte_perm(v.y, v.w, 0x7632));
    *reinterpret_cast<uint4*>(xs + r * row_bytes + staged_offset(c, p, t)) = o;
  }
}

// The chunk's mma steps into acc[j] (kTwice: some scale byte of the warp's is past 128).
template <int NW, bool kTwice>
__device__ inline void multiply(const Chunk<NW>& k, const uint8_t* xs, int xc, bool xlive,
                                float (&acc)[NW][4]) {
  uint32_t first[NW][2], second[NW][2];
#pragma unroll
  for (int j = 0; j < NW; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t b = (k.sbytes >> (8 * (2 * j + h))) & 0xffu;
      first[j][h] = first_factor(b);
      second[j][h] = kTwice ? second_factor(b) : 0;
    }
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const uint4 xq = xlive ? *reinterpret_cast<const uint4*>(&xs[xc + staged_offset(0, p, 0)])
                           : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < NW; ++j) {
      const uint32_t w0 = reinterpret_cast<const uint32_t*>(&k.w[j][0])[p];
      const uint32_t w1 = reinterpret_cast<const uint32_t*>(&k.w[j][1])[p];
      // a0: row g, positions 2t..; a1: row g + 8; a2, a3: the same at 2t + 8.
      const uint32_t f0 = first[j][0], f1 = first[j][1], s0 = second[j][0], s1 = second[j][1];
      const uint32_t a_h0[4] = {
          expand_pair<0, kTwice>(w0, f0, s0), expand_pair<0, kTwice>(w1, f1, s1),
          expand_pair<1, kTwice>(w0, f0, s0), expand_pair<1, kTwice>(w1, f1, s1)};
      mma_bf16_16816(acc[j], a_h0, xq.x, xq.y);
      const uint32_t a_h1[4] = {
          expand_pair<2, kTwice>(w0, f0, s0), expand_pair<2, kTwice>(w1, f1, s1),
          expand_pair<3, kTwice>(w0, f0, s0), expand_pair<3, kTwice>(w1, f1, s1)};
      mma_bf16_16816(acc[j], a_h1, xq.z, xq.w);
    }
  }
}

// cap: the rows a pass stages (the launch's shared memory holds that many).
template <bool kGateUp>
__global__ void __launch_bounds__(kThreads) w4_gemv_kernel(GroupedArgs a, int cap) {
  pdl_grid_begin();  // the expert (hence its weights) comes from the grouping kernel ahead
  constexpr int NW = kGateUp ? 2 : 1;
  extern __shared__ __align__(16) uint8_t xs[];
  __shared__ float red[kWarps][4 * NW][32];
  const int e = grouped_expert(a);
  if (e < 0) return;
  const ExpertPass<kGateUp> pass(a, e);
  const int64_t in = pass.in, out = pass.out;
  const int64_t first = a.offsets[e], rows = a.offsets[e + 1] - first;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int ks = k_splits(in), share = warp % ks, mine = static_cast<int>(in / kChunk) / ks;
  const int64_t c16 = int64_t{blockIdx.x} * (kWarps / ks) + warp / ks;
  const int64_t col[2] = {c16 * 16 + g, c16 * 16 + g + 8};
  const int c_first = share * mine;
  Lane<NW> l;
#pragma unroll
  for (int j = 0; j < NW; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // columns past the matrix read its last row, store nothing
      const DeviceMatrix& m = *pass.mats[j];
      const int64_t r = col[h] < out ? col[h] : out - 1;
      l.w[j][h] =
          static_cast<const uint8_t*>(m.data) + r * (in / 2) + c_first * (kChunk / 2) + 16 * t;
      l.s[j][h] = m.mx_scale + r * (in / 32) + c_first * (kChunk / 32) + t;
    }
  const int64_t row_bytes = staged_row_bytes(in);
  for (int64_t m0 = 0; m0 < rows; m0 += cap) {
    const int rn = static_cast<int>(std::min<int64_t>(cap, rows - m0));
    Ring<NW> ring;
#pragma unroll
    for (int u = 0; u < kAhead; ++u)
      if (u < mine) ring.c[u] = load_chunk(l, u);
    const auto row_of = [&](int r) {
      const int64_t gr = first + m0 + r;
      return kGateUp ? a.xb + int64_t{a.order[gr] / a.top_k} * in : a.h + gr * in;
    };
    if (m0 > 0) __syncthreads();  // every warp is done with the last pass's rows
    stage_x(row_of, rn, in, xs);
    __syncthreads();

    float acc[NW][4] = {};
    const bool xlive = g < rn;  // columns g >= rn of the mma's B are zeros, not loads
    const int xrow = static_cast<int>(g * row_bytes) + staged_offset(c_first, 0, t);
    for (int c0 = 0; c0 < mine; c0 += kAhead) {
#pragma unroll
      for (int u = 0; u < kAhead; ++u) {
        const int c = c0 + u;
        if (c >= mine) break;
        // Past 128 only in a synthetic checkpoint: then the warp takes the second multiply (a
        // warp-uniform branch, so the common path carries no select).
        if (__any_sync(0xffffffffu, __vcmpgtu4(ring.c[u].sbytes, 0x80808080u) != 0))
          multiply<NW, true>(ring.c[u], xs, xrow + staged_offset(c, 0, 0), xlive, acc);
        else
          multiply<NW, false>(ring.c[u], xs, xrow + staged_offset(c, 0, 0), xlive, acc);
        if (c + kAhead < mine) ring.c[u] = load_chunk(l, c + kAhead);  // the freed registers
      }
    }
    if (ks > 1) {
      add_k_shares(reinterpret_cast<float(&)[4 * NW]>(acc), red, share, ks);
      __syncthreads();  // red is rewritten by the next pass
    }
    if (share != 0) continue;
      // c0, c1: column g, the pass's rows 2t, 2t + 1; c2, c3: column g + 8.
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const int r = 2 * t + q;
        if (r >= rn || col[h] >= out) continue;
        const int64_t gr = first + m0 + r;
        const int32_t s = a.order[gr];
        if constexpr (kGateUp) {
          const float wt = a.before ? a.weights[s] : 1.0f;
          a.h[gr * a.inter + col[h]] =
              swiglu_bf16(acc[0][2 * h + q], acc[NW - 1][2 * h + q], true, a.lim, wt);
        } else {
          const float f = a.before ? 1.0f : a.weights[s];
          a.slots[int64_t{s} * a.hidden + col[h]] = acc[0][2 * h + q] * f;
        }
      }
  }
}

template <bool kGateUp>
SmemLimit& limit_of() {
  static SmemLimit limit(reinterpret_cast<const void*>(w4_gemv_kernel<kGateUp>));
  return limit;
}

template <bool kGateUp>
void launch(const GroupedArgs& a, int num_experts, int64_t tokens, cudaStream_t stream) {
  const int64_t in = kGateUp ? a.hidden : a.inter, out = kGateUp ? a.inter : a.hidden;
  const int64_t c16 = (out + 15) / 16, groups_a_block = kWarps / k_splits(in);
  const dim3 grid(static_cast<unsigned>((c16 + groups_a_block - 1) / groups_a_block),
                  grouped_grid_rows(num_experts, tokens * a.top_k));
  // Rows a pass: an expert has at most `tokens` (a token picks it once), and a pass at most kRows
  // (an expert with more takes several passes).
  const int cap = static_cast<int>(std::clamp<int64_t>(tokens, 1, kRows));
  const size_t smem = static_cast<size_t>(cap * staged_row_bytes(in));
  limit_of<kGateUp>().ensure(smem);
  launch_kernel(w4_gemv_kernel<kGateUp>, grid, kThreads, smem, stream, a, cap);
}

}  // namespace

void ensure_grouped_w4_gemv_smem() {
  limit_of<true>().ensure(0);
  limit_of<false>().ensure(0);
}

void launch_grouped_w4_gemv(bool gate_up, const GroupedArgs& a, int num_experts, int64_t tokens,
                            cudaStream_t stream) {
  if (a.hidden % kChunk != 0 || a.inter % kChunk != 0) {
    std::fprintf(stderr,
                 "moe: the W4 GEMV form needs hidden (%lld) and inter (%lld) multiples of %d\n",
                 static_cast<long long>(a.hidden), static_cast<long long>(a.inter), kChunk);
    std::abort();
  }
  gate_up ? launch<true>(a, num_experts, tokens, stream)
          : launch<false>(a, num_experts, tokens, stream);
}

}  // namespace deepinfer::cuda::moe_detail

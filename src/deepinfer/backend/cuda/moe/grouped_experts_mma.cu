// The grouped expert kernels on tensor cores. With several rows per expert the CUDA-core form
// runs out of FMA throughput before memory bandwidth (an MXFP4 byte feeds 2 weights x rows), so
// here a block owns (a 64-column tile, an expert) and walks K in steps of kMmaK: the weight tile,
// fetched in its stored format two steps ahead, is expanded into shared memory as bf16
// (weight_rows.cuh, the same values as every other path), the expert's next 16 rows staged beside
// it, and four warps each multiply their 16 columns with wmma 16x16x16 (bf16 in, fp32 accumulate).
// A pass takes 16 x MT rows (MT = 1 for decode's few rows per expert, 4 for prefill chunks); more
// rows take more passes over the weights.
#include <mma.h>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/moe/expert_math.cuh"
#include "deepinfer/backend/cuda/quant/weight_rows.cuh"

namespace deepinfer::cuda::moe_detail {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kN = 16 * kWarps;  // columns per block
constexpr int kM = 16;           // rows per wmma tile
constexpr int kK = static_cast<int>(kMmaK);
constexpr int kLd = kK + 8;  // padded bf16 row of a tile (a multiple of 8, as wmma needs)

// The K loop's tiles, then (reusing the bytes) the accumulators for the epilogue.
template <int NW, int MT>
union __align__(32) Tiles {
  struct {
    __nv_bfloat16 w[NW][kN][kLd];   // [matrix][column][k]
    __nv_bfloat16 x[kM * MT][kLd];  // [row][k]
  } in;
  float out[NW][kM * MT][kN];
};

// One thread's share of a weight tile (columns [n0, n0 + kN) x k [k0, k0 + kK)) in its stored
// form: 16-byte words and their scales' bits. The kernel fetches a tile two K steps before it
// expands it, so the weight reads of later steps are in flight while this one multiplies (one
// step's reads alone leave the memory system mostly idle).
template <MatrixFormat F>
struct RawTile {
  static constexpr int P = DeviceMatrix::per_load(F), kPerRow = kK / P;
  static constexpr int kItems = kN * kPerRow / kThreads;
  static_assert(kN * kPerRow % kThreads == 0, "a tile splits evenly over the threads");
  uint4 q[kItems];
  uint32_t s[kItems];
};

// Columns past m.rows as zeros.
template <MatrixFormat F>
__device__ inline void fetch_weights(const DeviceMatrix& m, int64_t n0, int64_t k0, RawTile<F>& r) {
  using T = RawTile<F>;
#pragma unroll
  for (int it = 0; it < T::kItems; ++it) {
    const int i = threadIdx.x + it * kThreads, c = i / T::kPerRow, kk = (i % T::kPerRow) * T::P;
    if (n0 + c < m.rows) {
      weight_rows::fetch<F>(weight_rows::row_of(m, n0 + c), k0 + kk, &r.q[it], &r.s[it]);
    } else {
      r.q[it] = make_uint4(0, 0, 0, 0);
      r.s[it] = 0;
    }
  }
}

// The tile as bf16 into t ([column][k]), the same values as every other path (weight_rows.cuh).
template <MatrixFormat F>
__device__ inline void expand_weights(const RawTile<F>& r, __nv_bfloat16 (*t)[kLd]) {
  using T = RawTile<F>;
#pragma unroll
  for (int it = 0; it < T::kItems; ++it) {
    const int i = threadIdx.x + it * kThreads, c = i / T::kPerRow, kk = (i % T::kPerRow) * T::P;
    float f[T::P];
    weight_rows::expand<F>(r.q[it], r.s[it], f);
#pragma unroll
    for (int j = 0; j < T::P; j += 2)
      *reinterpret_cast<__nv_bfloat162*>(&t[c][kk + j]) = __floats2bfloat162_rn(f[j], f[j + 1]);
  }
}

// Rows [m0, m0 + rn) of the expert's group, k [k0, k0 + kK): gate-up reads the slot's token row
// of xb, down the group row of h. Rows past rn as zeros.
template <bool kGateUp, int MT>
__device__ inline void stage_rows(const GroupedArgs& a, int64_t first, int64_t m0, int rn,
                                  int64_t k0, __nv_bfloat16 (*x)[kLd]) {
  constexpr int kVecs = kK / 8;
  const int64_t in = kGateUp ? a.hidden : a.inter;
  for (int i = threadIdx.x; i < kM * MT * kVecs; i += kThreads) {
    const int r = i / kVecs, v = i % kVecs;
    uint4 q = make_uint4(0, 0, 0, 0);
    if (r < rn) {
      const int64_t g = first + m0 + r;
      const __nv_bfloat16* src = kGateUp ? a.xb + int64_t{a.order[g] / a.top_k} * in : a.h + g * in;
      q = *reinterpret_cast<const uint4*>(src + k0 + v * 8);
    }
    *reinterpret_cast<uint4*>(&x[r][v * 8]) = q;
  }
}

template <bool kGateUp, MatrixFormat F, int MT>
__global__ void __launch_bounds__(kThreads) mma_kernel(GroupedArgs a) {
  pdl_grid_begin();
  constexpr int NW = kGateUp ? 2 : 1, kRowsPerPass = kM * MT;
  __shared__ Tiles<NW, MT> t;
  const int e = grouped_expert(a);
  if (e < 0) return;
  const int64_t first = a.offsets[e], rows = a.offsets[e + 1] - first;
  if (rows == 0) return;
  const moe_detail::ExpertPass<kGateUp> pass(a, e);
  const DeviceMatrix* const* mats = pass.mats;
  const int64_t in = pass.in, out = pass.out;
  const int64_t n0 = int64_t{blockIdx.x} * kN;
  const int warp = threadIdx.x >> 5;
  for (int64_t m0 = 0; m0 < rows; m0 += kRowsPerPass) {
    const int rn = rows - m0 < kRowsPerPass ? static_cast<int>(rows - m0) : kRowsPerPass;
    const int tiles = (rn + kM - 1) / kM;  // row tiles holding real rows
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[NW][MT];
#pragma unroll
    for (int j = 0; j < NW; ++j)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) wmma::fill_fragment(acc[j][mt], 0.0f);
    // K steps with the weights fetched two steps ahead (raw[0] even steps, raw[1] odd ones).
    RawTile<F> raw[2][NW];
#pragma unroll
    for (int j = 0; j < NW; ++j) {
      fetch_weights<F>(*mats[j], n0, 0, raw[0][j]);
      if (kK < in) fetch_weights<F>(*mats[j], n0, kK, raw[1][j]);
    }
    const auto step = [&](RawTile<F>(&r)[NW], int64_t k0) {
#pragma unroll
      for (int j = 0; j < NW; ++j) {
        expand_weights<F>(r[j], t.in.w[j]);
        if (k0 + 2 * kK < in) fetch_weights<F>(*mats[j], n0, k0 + 2 * kK, r[j]);
      }
      stage_rows<kGateUp, MT>(a, first, m0, rn, k0, t.in.x);
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kK; kk += 16) {
        // W's columns are rows of the tile: as a K x N operand it is column-major.
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb[NW];
#pragma unroll
        for (int j = 0; j < NW; ++j) wmma::load_matrix_sync(fb[j], &t.in.w[j][warp * 16][kk], kLd);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if (mt >= tiles) break;
          wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
          wmma::load_matrix_sync(fa, &t.in.x[mt * kM][kk], kLd);
#pragma unroll
          for (int j = 0; j < NW; ++j) wmma::mma_sync(acc[j][mt], fa, fb[j], acc[j][mt]);
        }
      }
      __syncthreads();
    };
    for (int64_t k0 = 0; k0 < in; k0 += 2 * kK) {
      step(raw[0], k0);
      if (k0 + kK < in) step(raw[1], k0 + kK);
    }
    // The tiles are dead now: their bytes take the accumulators.
#pragma unroll
    for (int j = 0; j < NW; ++j)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        if (mt < tiles)
          wmma::store_matrix_sync(&t.out[j][mt * kM][warp * 16], acc[j][mt], kN,
                                  wmma::mem_row_major);
    __syncthreads();
    for (int i = threadIdx.x; i < rn * kN; i += kThreads) {
      const int r = i / kN, c = i % kN;
      const int64_t n = n0 + c;
      if (n >= out) continue;
      const int64_t g = first + m0 + r;
      const int32_t s = a.order[g];
      if constexpr (kGateUp) {
        const float wt = a.before ? a.weights[s] : 1.0f;
        a.h[g * a.inter + n] = swiglu_bf16(t.out[0][r][c], t.out[NW - 1][r][c], true, a.lim, wt);
      } else {
        a.slots[int64_t{s} * a.hidden + n] = t.out[0][r][c] * (a.before ? 1.0f : a.weights[s]);
      }
    }
    __syncthreads();
  }
}

template <bool kGateUp, int MT>
void launch(MatrixFormat f, dim3 grid, const GroupedArgs& a, cudaStream_t stream) {
  switch (f) {
    case MatrixFormat::kBf16:
      launch_kernel(mma_kernel<kGateUp, MatrixFormat::kBf16, MT>, grid, kThreads, 0, stream, a);
      break;
    case MatrixFormat::kFp8Block:
      launch_kernel(mma_kernel<kGateUp, MatrixFormat::kFp8Block, MT>, grid, kThreads, 0, stream, a);
      break;
    case MatrixFormat::kMxfp4:
      launch_kernel(mma_kernel<kGateUp, MatrixFormat::kMxfp4, MT>, grid, kThreads, 0, stream, a);
      break;
  }
}

}  // namespace

void launch_grouped_mma(bool gate_up, MatrixFormat format, const GroupedArgs& a, int num_experts,
                        int64_t tokens, cudaStream_t stream) {
  const int64_t out = gate_up ? a.inter : a.hidden;
  const dim3 grid(static_cast<unsigned>((out + kN - 1) / kN),
                  grouped_grid_rows(num_experts, tokens * a.top_k));
  // 64-row passes once an expert averages more than 16 rows (prefill chunks).
  const bool wide = tokens * a.top_k > int64_t{kM} * num_experts;
  if (gate_up)
    wide ? launch<true, 4>(format, grid, a, stream) : launch<true, 1>(format, grid, a, stream);
  else
    wide ? launch<false, 4>(format, grid, a, stream) : launch<false, 1>(format, grid, a, stream);
}

}  // namespace deepinfer::cuda::moe_detail

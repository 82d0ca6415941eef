// Prefill's MXFP4 expert GEMMs on warpgroup tensor cores (W4A16, wgmma): gate-up (h = swiglu(w1 x,
// w3 x)) and down (slots = w2 h) over 64- or 128-row passes, one (128-column tile, expert pass) a
// block. 128-row passes (experts averaging over W4_WGMMA_ROWS128_MIN_AVG rows: long prefill
// chunks) expand each weight once for twice the products and take m64n128 wgmmas.
// The mma.sync kernel (grouped_experts_w4.cu) spends its issue slots on both the nibble expansion
// and the MMAs; here the MMA is asynchronous, so step s + 1's weights expand while step s
// multiplies.
//
// Roles: out^T = W in^T. The weights are wgmma's A from registers (a warpgroup 64 columns, a warp
// 16), expanded from the stored bytes exactly as the mma.sync kernel expands its B fragments (the
// same k map, w4_fragments.cuh); the pass's 64 rows are B, read by the hardware from shared
// memory. So the rows must sit in the k map's order: run_grouped hands over x permuted within each
// 128-k block (permute_k128), the gate-up writes h that way (a block's 128 columns are one block
// of the down's k), and each stage's rows land K-major under the 128-byte swizzle. Every stage
// (weights, scales, rows) is copied by cp.async ahead. Each product sums the same expanded bf16
// values as the other kernels, in a different order (fp32 tolerance).
#include <cuda_bf16.h>

#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/moe/expert_math.cuh"
#include "deepinfer/backend/cuda/moe/w4_fragments.cuh"
#include "deepinfer/backend/cuda/smem_limit.h"
#include "deepinfer/backend/cuda/wgmma.cuh"

namespace deepinfer::cuda::moe_detail {
namespace {

constexpr int kThreads = 256;  // two warpgroups
constexpr int kBN = 128;       // columns of each matrix a block: 64 a warpgroup, 16 a warp
constexpr int kK = 128;        // k a stage: one sub-tile of the k map
// Stages of cp.async copies, and blocks an SM, of the 64-row passes (__launch_bounds__: 2 caps
// registers at 128, and shared memory then holds 3 stages a block). From 4 stages the copies run
// kStages - 2 tiles ahead, so the stage a copy overwrites was last read by the tile before the
// previous one, whose wgmma groups have retired (at most kInflight <= 8 run on); with 3 they run 2
// ahead and each tile first drains the wgmma pipeline.
#ifndef W4_WGMMA_STAGES
#define W4_WGMMA_STAGES 3
#endif
#ifndef W4_WGMMA_MIN_BLOCKS
#define W4_WGMMA_MIN_BLOCKS (W4_WGMMA_STAGES > 3 ? 1 : 2)
#endif
// wgmma groups left running when a step's fragments are expanded (wait_group's N): 2 expands a
// step further ahead, its fragments kept in registers meanwhile.
#ifndef W4_WGMMA_INFLIGHT
#define W4_WGMMA_INFLIGHT (W4_WGMMA_STAGES > 3 ? 2 : 1)
#endif
// 1: step s + 1's fragments expand while step s's wgmma runs, before the wait that retires the
// older steps; 0: after it. A variant to time (gemm/fp8_wgmma.cu has the same knob).
#ifndef W4_WGMMA_EARLY_EXPAND
#define W4_WGMMA_EARLY_EXPAND 0
#endif
constexpr bool kEarlyExpand = W4_WGMMA_EARLY_EXPAND != 0;
// Experts averaging over this many rows take 128-row passes (a variant sets it past any batch to
// time the 64-row ones).
#ifndef W4_WGMMA_ROWS128_MIN_AVG
#define W4_WGMMA_ROWS128_MIN_AVG 64
#endif
// The 128-row passes: accumulators of 128 rows take registers for one block an SM, whose shared
// memory then holds 4 stages (49 KB each for the gate-up).
#ifndef W4_WGMMA128_STAGES
#define W4_WGMMA128_STAGES 4
#endif

// Pipeline shape of R-row passes (R: wgmma's N).
template <int R>
struct Pipe {
  static constexpr int kStages = R == 64 ? W4_WGMMA_STAGES : W4_WGMMA128_STAGES;
  static constexpr int kMinBlocks = R == 64 ? W4_WGMMA_MIN_BLOCKS : 1;
  static constexpr int kInflight = R == 64 ? W4_WGMMA_INFLIGHT : (kStages > 3 ? 2 : 1);
  static constexpr bool kDrain = kStages < 4;
  static constexpr int kAhead = kDrain ? kStages - 1 : kStages - 2;
  static_assert(kStages >= 3 && (R == 64 || R == 128));
};

// One stage of NW matrices and R rows, offsets into the 1024-byte aligned dynamic shared memory.
template <int NW, int R>
struct Stage {
  static constexpr int kHalf = R * 128;            // rows' k 0..63 or 64..127
  static constexpr int kX = 2 * kHalf;             // [half][row][128 B], swizzled
  static constexpr int kW = NW * kBN * (kK / 2);   // [matrix][column][64 B]
  static constexpr int kS = NW * kBN * (kK / 32);  // [matrix][column][4 E8M0]
  static constexpr int kBytes = (kX + kW + kS + 1023) / 1024 * 1024;
};
// The epilogue stages the output tile in the stages' memory: h rows of bf16, or slot rows of
// fp32, each padded against bank conflicts.
template <bool kGateUp>
constexpr int out_stride() {
  return kBN * (kGateUp ? 2 : 4) + 16;
}
template <bool kGateUp, int R>
constexpr size_t smem_of() {
  constexpr int kBytes = Stage < kGateUp ? 2 : 1, R > ::kBytes * Pipe<R>::kStages;
  static_assert(R * out_stride<kGateUp>() <= kBytes);
  return size_t{kBytes} + 1024;  // + the alignment slack
}

// d += A B over the pass's first 32 q rows of B (q = 1 .. R / 32): an expert's last pass, short of
// R rows, multiplies only the 32-row groups that hold its rows (the accumulators past them stay
// untouched and unread). 0: always all R (a variant to time).
#ifndef W4_WGMMA_NARROW_TAIL
#define W4_WGMMA_NARROW_TAIL 1
#endif
// The kernel picks Q once a block (its main loop compiled for each), so no branch sits between
// the wgmmas of a step.
template <int Q, int M>
__device__ inline void wgmma_rows(float (&d)[M], const uint32_t (&a)[4], uint64_t b) {
  if constexpr (Q == 1)
    wgmma_m64n32k16_rs(d, a, b);
  else if constexpr (Q == 2)
    wgmma_m64n64k16_rs(d, a, b);
  else if constexpr (Q == 3)
    wgmma_m64n96k16_rs(d, a, b);
  else
    wgmma_m64n128k16_rs(d, a, b);
}

// Step s's A fragment of rows g (raw0) and g + 8 (raw1): fragment positions {2t, 2t + 1} from
// nibbles (2h, 2h + 4) of word p, {2t + 8, 2t + 9} from (2h + 1, 2h + 5) (w4_k_of).
template <int S, bool kTwice>
__device__ inline void expand_step(uint32_t (&f)[4], const uint4& raw0, const uint4& raw1,
                                   uint32_t f0, uint32_t f1, uint32_t s0, uint32_t s1) {
  const uint32_t w0 = reinterpret_cast<const uint32_t*>(&raw0)[S >> 1];
  const uint32_t w1 = reinterpret_cast<const uint32_t*>(&raw1)[S >> 1];
  constexpr int H = S & 1;
  f[0] = expand_pair<2 * H, kTwice>(w0, f0, s0);
  f[1] = expand_pair<2 * H, kTwice>(w1, f1, s1);
  f[2] = expand_pair<2 * H + 1, kTwice>(w0, f0, s0);
  f[3] = expand_pair<2 * H + 1, kTwice>(w1, f1, s1);
}

template <bool kGateUp, int R>
__global__ void __launch_bounds__(kThreads, Pipe<R>::kMinBlocks) w4_wgmma_kernel(GroupedArgs a) {
  pdl_grid_begin();
  constexpr int NW = kGateUp ? 2 : 1;
  using St = Stage<NW, R>;
  constexpr int kStages = Pipe<R>::kStages, kAhead = Pipe<R>::kAhead;
  constexpr int kInflight = Pipe<R>::kInflight;
  constexpr bool kDrain = Pipe<R>::kDrain;
  extern __shared__ uint8_t wg_sm_raw[];
  uint8_t* sm = wg_sm_raw + ((1024 - (shared_addr(wg_sm_raw) & 1023)) & 1023);
  const int2 item = pass_of_row(a, R);
  const int e = item.x;
  if (e < 0) return;
  const int64_t first = a.offsets[e] + item.y;
  const int64_t left = a.offsets[e + 1] - first;
  const int rn = left < R ? static_cast<int>(left) : R;
  // 32-row groups the wgmmas take (wgmma_rows). 128-row passes only: a second main loop pushed
  // the 64-row gate-up (128 registers, two blocks an SM) from 104 to 136 bytes of spill loads.
  const int q = W4_WGMMA_NARROW_TAIL && R == 128 ? (rn + 31) / 32 : R / 32;
  const ExpertPass<kGateUp> pass(a, e);
  const int64_t in = pass.in;
  const int64_t n0 = int64_t{blockIdx.x} * kBN;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int tiles = static_cast<int>(in / kK);

  // This thread's copies a stage (q = tid + 256 i): R / 16 16-byte chunks of rows (row q / 16,
  // chunk q % 16), 2 NW of weights (matrix q / 512, column q / 4 % 128, chunk q % 4) and, for
  // tid < 128 NW, a 4-byte word of scales (matrix tid / 128, column tid % 128). The output dim
  // is a multiple of kBN, so every column exists.
  constexpr int kWc = 2 * NW, kXc = R / 16;
  const __nv_bfloat16* xsrc[kXc];
  int xdst[kXc];
  const uint8_t* wsrc[kWc];
  int wdst[kWc];
  bool xok[kXc];
#pragma unroll
  for (int i = 0; i < kXc; ++i) {
    const int q = tid + kThreads * i, r = q >> 4, c = q & 15;
    xok[i] = r < rn;
    const int64_t row = first + (xok[i] ? r : 0);
    xsrc[i] = (kGateUp ? a.xp + int64_t{a.order[row] / a.top_k} * in : a.h + row * in) + 8 * c;
    xdst[i] = (c >> 3) * St::kHalf + r * 128 + (((c & 7) ^ (r & 7)) << 4);
  }
#pragma unroll
  for (int i = 0; i < kWc; ++i) {
    const int q = tid + kThreads * i, j = q >> 9, col = (q >> 2) & (kBN - 1), ch = q & 3;
    wsrc[i] = static_cast<const uint8_t*>(pass.mats[j]->data) + (n0 + col) * (in / 2) + 16 * ch;
    wdst[i] = St::kX + (j * kBN + col) * (kK / 2) + 16 * ch;
  }
  const bool scopy = tid < NW * kBN;
  const uint8_t* ssrc =
      pass.mats[scopy ? tid >> 7 : 0]->mx_scale + (n0 + (tid & (kBN - 1))) * (in / 32);
  const auto load = [&](int tile) {
    uint8_t* st = sm + (tile % kStages) * St::kBytes;
    const int64_t k0 = int64_t{tile} * kK;
#pragma unroll
    for (int i = 0; i < kXc; ++i)  // rows past the wgmmas' 32 q are not read
      if ((tid + kThreads * i) >> 4 < 32 * q) cp_async16(st + xdst[i], xsrc[i] + k0, xok[i]);
#pragma unroll
    for (int i = 0; i < kWc; ++i) cp_async16(st + wdst[i], wsrc[i] + k0 / 2);
    if (scopy) copy4(st + St::kX + St::kW + 4 * tid, ssrc + k0 / 32, true);
  };

  float acc[NW][R / 2];
#pragma unroll
  for (int j = 0; j < NW; ++j)
#pragma unroll
    for (int i = 0; i < R / 2; ++i) acc[j][i] = 0.0f;
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < tiles) load(s);
    cp_async_commit();
  }
  const int col0 = (warp >> 2) * 64 + (warp & 3) * 16 + g;  // this thread's rows of A: +0, +8
  const auto main_loop = [&](auto q_tag) {
    constexpr int Q = decltype(q_tag)::value;
    for (int tile = 0; tile < tiles; ++tile) {
      cp_async_wait<kAhead - 1>();
      fence_async_shared();
      if (kDrain) wgmma_wait<0>();  // the stage the next load takes is no longer read
      __syncthreads();
      if (tile + kAhead < tiles) load(tile + kAhead);
      cp_async_commit();
      const uint8_t* st = sm + (tile % kStages) * St::kBytes;
      uint4 raw[NW][2];
      uint32_t f1[NW][2], f2[NW][2], sbytes = 0;
#pragma unroll
      for (int j = 0; j < NW; ++j)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int col = j * kBN + col0 + 8 * r;
          raw[j][r] = *reinterpret_cast<const uint4*>(st + St::kX + col * (kK / 2) + 16 * t);
          const uint32_t sb = st[St::kX + St::kW + col * (kK / 32) + t];
          f1[j][r] = first_factor(sb);
          f2[j][r] = second_factor(sb);
          sbytes |= sb << (8 * (2 * j + r));
        }
      // Scales past 128 only in synthetic checkpoints: a warp-uniform branch around the expansion
      // alone (every warp of the warpgroup reaches the same wgmma).
      const bool twice = __any_sync(0xffffffffu, __vcmpgtu4(sbytes, 0x80808080u) != 0);
      const uint32_t xs = shared_addr(st);
      const auto step = [&](auto s_tag) {
        constexpr int S = decltype(s_tag)::value;
        uint32_t fa[NW][4];
#pragma unroll
        for (int j = 0; j < NW; ++j) {
          if (twice)
            expand_step<S, true>(fa[j], raw[j][0], raw[j][1], f1[j][0], f1[j][1], f2[j][0],
                                 f2[j][1]);
          else
            expand_step<S, false>(fa[j], raw[j][0], raw[j][1], f1[j][0], f1[j][1], 0, 0);
        }
        const uint64_t desc = wgmma_desc_k128(xs + (S >> 2) * St::kHalf + (S & 3) * 32);
        wgmma_fence();
#pragma unroll
        for (int j = 0; j < NW; ++j) wgmma_rows<Q>(acc[j], fa[j], desc);
        wgmma_commit();
        wgmma_wait<kInflight>();  // older steps are done: their fragments' registers are free
      };
      // The early form: step s + 1's fragments expand while step s's wgmma runs, before the wait.
      uint32_t next[NW][4];
      const auto expand = [&](auto s_tag) {
        constexpr int S = decltype(s_tag)::value;
#pragma unroll
        for (int j = 0; j < NW; ++j) {
          if (twice)
            expand_step<S, true>(next[j], raw[j][0], raw[j][1], f1[j][0], f1[j][1], f2[j][0],
                                 f2[j][1]);
          else
            expand_step<S, false>(next[j], raw[j][0], raw[j][1], f1[j][0], f1[j][1], 0, 0);
        }
      };
      const auto early_step = [&](auto s_tag) {
        constexpr int S = decltype(s_tag)::value;
        uint32_t fa[NW][4];
#pragma unroll
        for (int j = 0; j < NW; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) fa[j][i] = next[j][i];
        const uint64_t desc = wgmma_desc_k128(xs + (S >> 2) * St::kHalf + (S & 3) * 32);
        wgmma_fence();
#pragma unroll
        for (int j = 0; j < NW; ++j) wgmma_rows<Q>(acc[j], fa[j], desc);
        wgmma_commit();
        if constexpr (S < 7) expand(std::integral_constant<int, S + 1>{});
        wgmma_wait<kInflight>();
      };
      const auto run = [&](auto s_tag) {
        if constexpr (kEarlyExpand)
          early_step(s_tag);
        else
          step(s_tag);
      };
      if constexpr (kEarlyExpand) expand(std::integral_constant<int, 0>{});
      run(std::integral_constant<int, 0>{});
      run(std::integral_constant<int, 1>{});
      run(std::integral_constant<int, 2>{});
      run(std::integral_constant<int, 3>{});
      run(std::integral_constant<int, 4>{});
      run(std::integral_constant<int, 5>{});
      run(std::integral_constant<int, 6>{});
      run(std::integral_constant<int, 7>{});
    }
  };
  if constexpr (R == 64) {
    main_loop(std::integral_constant<int, 2>{});
  } else {
    if (q == 1)
      main_loop(std::integral_constant<int, 1>{});
    else if (q == 2)
      main_loop(std::integral_constant<int, 2>{});
    else if (q == 3)
      main_loop(std::integral_constant<int, 3>{});
    else
      main_loop(std::integral_constant<int, 4>{});
  }
  wgmma_wait<0>();
#pragma unroll
  for (int j = 0; j < NW; ++j) wgmma_pin(acc[j]);
  cp_async_wait<0>();
  __syncthreads();  // every stage is free: the output tile is staged there

  // Element (column col0 + 8 hr, row 8i + 2t + c) is acc[j][4i + 2hr + c]; h's columns go to
  // their k-map positions (w4_pos_of), the down's permuted input.
  constexpr int kStride = out_stride<kGateUp>();
#pragma unroll
  for (int i = 0; i < R / 8; ++i)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int r = 8 * i + 2 * t + c;
      const bool scaled = kGateUp == a.before;  // the routing weight goes here
      const float wt = scaled && r < rn ? a.weights[a.order[first + r]] : 1.0f;
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int k = 4 * i + 2 * hr + c, col = col0 + 8 * hr;
        if constexpr (kGateUp)
          reinterpret_cast<__nv_bfloat16*>(sm + r * kStride)[w4_pos_of(col)] =
              swiglu_bf16(acc[0][k], acc[1][k], true, a.lim, wt);
        else
          reinterpret_cast<float*>(sm + r * kStride)[col] = acc[0][k] * wt;
      }
    }
  __syncthreads();
  constexpr int kChunks = kBN * (kGateUp ? 2 : 4) / 16;  // 16-byte chunks of an output row
#pragma unroll
  for (int i = 0; i < R * kChunks / kThreads; ++i) {
    const int q = tid + kThreads * i, r = q / kChunks, ch = q % kChunks;
    if (r >= rn) continue;
    const uint4 v = *reinterpret_cast<const uint4*>(sm + r * kStride + 16 * ch);
    if constexpr (kGateUp)
      *reinterpret_cast<uint4*>(a.h + (first + r) * a.inter + n0 + 8 * ch) = v;
    else
      *reinterpret_cast<uint4*>(a.slots + int64_t{a.order[first + r]} * a.hidden + n0 + 4 * ch) = v;
  }
}

// y = x with each row's 128-k blocks permuted into the k map's fragment order: position
// 16 s + kappa of a block holds the block's k w4_k_of(s, kappa).
__global__ void permute_k128_kernel(const __nv_bfloat16* x, int64_t n, __nv_bfloat16* y) {
  pdl_grid_begin();
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int l = static_cast<int>(i & 127);
  y[i] = x[(i & ~int64_t{127}) + w4_k_of(l >> 4, l & 15)];
}

template <bool kGateUp, int R>
SmemLimit& limit_of() {
  static SmemLimit l(reinterpret_cast<const void*>(w4_wgmma_kernel<kGateUp, R>));
  return l;
}

template <bool kGateUp, int R>
void launch(const GroupedArgs& a, int64_t passes, cudaStream_t stream) {
  const int64_t out = kGateUp ? a.inter : a.hidden;
  if (out % kBN != 0 || (kGateUp ? a.hidden : a.inter) % kK != 0) {
    std::fprintf(stderr, "moe: the wgmma expert kernel wants hidden %lld and inter %lld in 128s\n",
                 static_cast<long long>(a.hidden), static_cast<long long>(a.inter));
    std::abort();
  }
  const dim3 grid(static_cast<unsigned>(out / kBN), static_cast<unsigned>(passes));
  limit_of<kGateUp, R>().ensure(smem_of<kGateUp, R>());
  launch_kernel(w4_wgmma_kernel<kGateUp, R>, grid, kThreads, smem_of<kGateUp, R>(), stream, a);
}

}  // namespace

void ensure_grouped_wgmma_smem() {
  limit_of<true, 64>().ensure(smem_of<true, 64>());
  limit_of<false, 64>().ensure(smem_of<false, 64>());
  limit_of<true, 128>().ensure(smem_of<true, 128>());
  limit_of<false, 128>().ensure(smem_of<false, 128>());
}

int grouped_wgmma_rows(int num_experts, int64_t tokens, int top_k) {
  return tokens * top_k > int64_t{W4_WGMMA_ROWS128_MIN_AVG} * num_experts ? 128 : 64;
}

void permute_k128(const __nv_bfloat16* x, int64_t rows, int64_t cols, __nv_bfloat16* y,
                  cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  launch_kernel(permute_k128_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0, stream, x, n,
                y);
}

void launch_grouped_wgmma(bool gate_up, const GroupedArgs& a, int num_experts, int64_t tokens,
                          cudaStream_t stream) {
  // A grid row per (expert, pass): the sum over experts of ceil(rows / R) is at most the active
  // experts plus slots / R.
  const int64_t slots = tokens * a.top_k;
  const int rows = grouped_wgmma_rows(num_experts, tokens, a.top_k);
  const int64_t passes = grouped_grid_rows(num_experts, slots) + slots / rows;
  if (rows == 128)
    gate_up ? launch<true, 128>(a, passes, stream) : launch<false, 128>(a, passes, stream);
  else
    gate_up ? launch<true, 64>(a, passes, stream) : launch<false, 64>(a, passes, stream);
}

}  // namespace deepinfer::cuda::moe_detail

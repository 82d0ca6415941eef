// MoeRunner::run_grouped: the routed experts with the routing left on the device, so a CUDA
// graph can capture it. Slots (s = t * top_k + k) are grouped per expert by a stable counting
// sort, then two kernels over a (column tile, expert) grid do gate+up+SwiGLU and down. Decode
// has few rows per expert and is bound by reading the weights, so each weight row is read once
// per chunk of kRows rows by one warp (16-byte loads of the stored format, expanded in registers:
// weight_rows.cuh), with the chunk's inputs in shared memory.
#include <algorithm>
#include <cub/block/block_scan.cuh>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/moe/expert_math.cuh"
#include "deepinfer/backend/cuda/moe/experts.h"
#include "deepinfer/backend/cuda/quant/weight_rows.cuh"
#include "deepinfer/backend/cuda/reduce.cuh"
#include "deepinfer/backend/cuda/smem_limit.h"

namespace deepinfer::cuda {
namespace {

using moe_detail::GroupedArgs;

constexpr int kGroupThreads = 256;
constexpr int kGroupWarps = kGroupThreads / 32;

size_t group_smem(int num_experts) {
  return sizeof(int32_t) * static_cast<size_t>(num_experts) * (kGroupWarps + 1);
}

// One block. order[offsets[e] ..< offsets[e + 1]] = expert e's slots, ascending; active[] the
// experts with slots, ascending, *num_active of them. Counts come from
// shared-memory atomics (order-free); placement goes a tile of slots at a time: a warp ranks its
// equal ids with __match_any_sync and learns, per expert, how many the warps before it hold.
__global__ void __launch_bounds__(kGroupThreads)
    group_kernel(const int32_t* ids, int64_t n, int num_experts, int32_t* offsets, int32_t* active,
                 int32_t* num_active, int32_t* order) {
  pdl_grid_begin();
  extern __shared__ int32_t group_sm[];
  const int E = num_experts;
  int32_t* next = group_sm;         // [E]: the count, then the next free position
  int32_t* warp_at = group_sm + E;  // [kGroupWarps][E]: per warp, its count, then its start
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int i = tid; i < E * (kGroupWarps + 1); i += kGroupThreads) group_sm[i] = 0;
  __syncthreads();
  for (int64_t s = tid; s < n; s += kGroupThreads) {
    const int32_t e = ids[s];
    if (e < 0 || e >= E) {
      printf("moe: expert id %d at slot %lld outside 0..%d\n", e, static_cast<long long>(s), E - 1);
      __trap();
    }
    atomicAdd(&next[e], 1);
  }
  __syncthreads();

  // Exclusive scan of the counts, each thread owning a contiguous run of experts.
  const int per = (E + kGroupThreads - 1) / kGroupThreads;
  const int lo = min(E, tid * per), hi = min(E, lo + per);
  int mine = 0, mine_active = 0;
  for (int e = lo; e < hi; ++e) {
    mine += next[e];
    mine_active += next[e] > 0;
  }
  using Scan = cub::BlockScan<int, kGroupThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  int at = 0, total = 0, act = 0, total_active = 0;
  Scan(scan_tmp).ExclusiveSum(mine, at, total);
  __syncthreads();  // scan_tmp is reused
  Scan(scan_tmp).ExclusiveSum(mine_active, act, total_active);
  for (int e = lo; e < hi; ++e) {
    const int c = next[e];
    offsets[e] = next[e] = at;
    at += c;
    if (c > 0) active[act++] = e;
  }
  if (tid == 0) {
    offsets[E] = total;
    *num_active = total_active;
  }
  __syncthreads();

  for (int64_t base = 0; base < n; base += kGroupThreads) {
    const int64_t s = base + tid;
    const int32_t e = s < n ? ids[s] : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(peers & ((1u << lane) - 1));
    if (e >= 0 && rank == 0) warp_at[warp * E + e] = __popc(peers);
    __syncthreads();
    for (int x = tid; x < E; x += kGroupThreads) {
      int pos = next[x];
      for (int w = 0; w < kGroupWarps; ++w) {
        const int c = warp_at[w * E + x];
        warp_at[w * E + x] = pos;
        pos += c;
      }
      next[x] = pos;
    }
    __syncthreads();
    if (e >= 0) order[warp_at[warp * E + e] + rank] = static_cast<int32_t>(s);
    __syncthreads();
    for (int i = tid; i < E * kGroupWarps; i += kGroupThreads) warp_at[i] = 0;
    __syncthreads();
  }
}

// An expert's rows per pass (weight_rows::rows_per_pass of the batch's tokens: an expert gets at
// most one row per token), at most kRows.
constexpr int kRows = weight_rows::kMaxRowsPerPass;
using weight_rows::rows_per_pass;
constexpr int kWarps = 8;
constexpr int kColsPerWarp = 4;
constexpr int kCols = kWarps * kColsPerWarp;  // output columns per block

__device__ inline void check_aligned(const DeviceMatrix& m, int e, const char* name) {
  if (reinterpret_cast<uintptr_t>(m.data) % 16 != 0) {
    printf("moe: expert %d's %s at %p is not 16-byte aligned\n", e, name, m.data);
    __trap();
  }
}

// Rows [first, first + rn) of the expert's group into xs ([rows per pass][in] bf16): input row
// `first + r` itself, or with `order`, the token of slot order[first + r].
__device__ inline void stage_rows(const __nv_bfloat16* src, int64_t in, const int32_t* order,
                                  int top_k, int64_t first, int rn, __nv_bfloat16* xs) {
  const int vecs = static_cast<int>(in / 8);  // 32-bit: no 64-bit division per vector
  for (int i = threadIdx.x; i < rn * vecs; i += blockDim.x) {
    const int r = i / vecs, c = i % vecs;
    const int64_t row = order ? order[first + r] / top_k : first + r;
    reinterpret_cast<uint4*>(xs + r * in)[c] = reinterpret_cast<const uint4*>(src + row * in)[c];
  }
}

extern __shared__ uint4 gemm_sm[];  // 16-byte aligned staging rows

// One (column tile, expert) block. kGateUp: h[i, n] = swiglu(w1 x_i, w3 x_i)[n] over the expert's
// group rows i, inputs x of the slots' tokens. Else (down): slots[order[i], n] = (w2 h_i)[n],
// times the routing weight unless it went into h.
template <bool kGateUp, MatrixFormat F, int R>
__global__ void __launch_bounds__(kWarps * 32) expert_kernel(GroupedArgs a) {
  pdl_grid_begin();
  constexpr int NW = kGateUp ? 2 : 1;
  const int e = moe_detail::grouped_expert(a);
  if (e < 0) return;
  const int64_t first = a.offsets[e], rows = a.offsets[e + 1] - first;
  if (rows == 0) return;
  const moe_detail::ExpertPass<kGateUp> pass(a, e);
  const DeviceMatrix* const* mats = pass.mats;
  const int64_t in = pass.in, out = pass.out;
  if (threadIdx.x == 0) {
#pragma unroll
    for (int q = 0; q < NW; ++q) check_aligned(*mats[q], e, kGateUp ? (q ? "w3" : "w1") : "w2");
  }
  auto* xs = reinterpret_cast<__nv_bfloat16*>(gemm_sm);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t c0 = 0; c0 < rows; c0 += R) {
    const int rn = rows - c0 < R ? static_cast<int>(rows - c0) : R;
    stage_rows(kGateUp ? a.xb : a.h, in, kGateUp ? a.order : nullptr, a.top_k, first + c0, rn, xs);
    __syncthreads();
    for (int j = 0; j < kColsPerWarp; ++j) {
      const int64_t n = int64_t{blockIdx.x} * kCols + j * kWarps + warp;
      if (n >= out) break;
      weight_rows::Row ws[NW];
#pragma unroll
      for (int q = 0; q < NW; ++q) ws[q] = weight_rows::row_of(*mats[q], n);
      float acc[NW][R];
      weight_rows::dot_rows<F, NW, R>(ws, xs, in, in, rn, acc);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r < rn && lane == r) {
          const int64_t i = first + c0 + r;
          const int32_t s = a.order[i];
          if constexpr (kGateUp) {
            const float wt = a.before ? a.weights[s] : 1.0f;
            a.h[i * a.inter + n] =
                moe_detail::swiglu_bf16(acc[0][r], acc[NW - 1][r], true, a.lim, wt);
          } else {
            a.slots[int64_t{s} * a.hidden + n] = acc[0][r] * (a.before ? 1.0f : a.weights[s]);
          }
        }
      }
    }
    __syncthreads();
  }
}

size_t gemm_smem(int64_t in, int rows) {
  return sizeof(__nv_bfloat16) * rows * static_cast<size_t>(in);
}

// Raised once per kernel and device; the opt-in past 48 KB happens in reserve_grouped, outside
// any capture.
template <bool kGateUp, MatrixFormat F, int R>
void ensure_smem_for(int64_t in) {
  static SmemLimit limit(reinterpret_cast<const void*>(expert_kernel<kGateUp, F, R>));
  limit.ensure(gemm_smem(in, R));
}
template <bool kGateUp, MatrixFormat F>
void ensure_smem_rows(int64_t in) {
  ensure_smem_for<kGateUp, F, 1>(in);
  ensure_smem_for<kGateUp, F, 2>(in);
  ensure_smem_for<kGateUp, F, 4>(in);
  ensure_smem_for<kGateUp, F, kRows>(in);
}
template <bool kGateUp>
void ensure_smem(int64_t in) {
  ensure_smem_rows<kGateUp, MatrixFormat::kBf16>(in);
  ensure_smem_rows<kGateUp, MatrixFormat::kFp8Block>(in);
  ensure_smem_rows<kGateUp, MatrixFormat::kMxfp4>(in);
}

template <bool kGateUp, MatrixFormat F>
void launch_rows(int rows, dim3 grid, int64_t in, const GroupedArgs& ga, cudaStream_t stream) {
  const size_t smem = gemm_smem(in, rows);
  switch (rows) {
    case 1:
      launch_kernel(expert_kernel<kGateUp, F, 1>, grid, kWarps * 32, smem, stream, ga);
      break;
    case 2:
      launch_kernel(expert_kernel<kGateUp, F, 2>, grid, kWarps * 32, smem, stream, ga);
      break;
    case 4:
      launch_kernel(expert_kernel<kGateUp, F, 4>, grid, kWarps * 32, smem, stream, ga);
      break;
    default:
      launch_kernel(expert_kernel<kGateUp, F, kRows>, grid, kWarps * 32, smem, stream, ga);
      break;
  }
}

// `rows`: rows_per_pass of the batch; `in`: the pass's input width (hidden, or inter for down).
template <bool kGateUp>
void launch_experts(MatrixFormat f, int rows, dim3 grid, int64_t in, const GroupedArgs& ga,
                    cudaStream_t stream) {
  switch (f) {
    case MatrixFormat::kBf16:
      launch_rows<kGateUp, MatrixFormat::kBf16>(rows, grid, in, ga, stream);
      break;
    case MatrixFormat::kFp8Block:
      launch_rows<kGateUp, MatrixFormat::kFp8Block>(rows, grid, in, ga, stream);
      break;
    case MatrixFormat::kMxfp4:
      launch_rows<kGateUp, MatrixFormat::kMxfp4>(rows, grid, in, ga, stream);
      break;
  }
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "MoeRunner grouped path: %s\n", what);
  std::abort();
}

// A buffer run_grouped needs: reserve_grouped must have made it at least n long.
template <typename T>
T* reserved(const DeviceBuffer<T>& b, size_t n, const char* name) {
  if (b.size() < n) {
    std::fprintf(stderr,
                 "MoeRunner::run_grouped: scratch %s holds %zu, the call needs %zu: "
                 "reserve_grouped was not called for these dims\n",
                 name, b.size(), n);
    std::abort();
  }
  return b.get();
}

// The group kernel's shared memory must fit the default 48 KB.
void check_num_experts(int num_experts) {
  if (num_experts <= 0 || group_smem(num_experts) > 48 * 1024) {
    std::fprintf(stderr, "MoeRunner grouped path: num_experts %d outside 1..%zu\n", num_experts,
                 48 * 1024 / group_smem(1));
    std::abort();
  }
}

// Decode batches of MIN..MAX tokens run the shared expert on a second stream beside the routed
// experts (run_grouped); others run it after them. On an H100 (docs/gpu_pdl/run5_h100) the overlap
// took B=32 7.93 -> 7.71-7.83 ms and B=128 13.55 -> 13.38-13.44, but B=1 2.54 -> 2.62: the fork
// and join edges cost the graph more than the shared expert's three GEMVs (under 16 rows) gain.
#ifndef MOE_SHARED_OVERLAP_MIN_TOKENS
#define MOE_SHARED_OVERLAP_MIN_TOKENS 17
#endif
#ifndef MOE_SHARED_OVERLAP_MAX_TOKENS
#define MOE_SHARED_OVERLAP_MAX_TOKENS 128
#endif

}  // namespace

void MoeRunner::reserve_grouped(int64_t tokens, int top_k, int64_t hidden, int64_t inter,
                                int64_t shared_inter, int num_experts) {
  check_num_experts(num_experts);
  const size_t T = static_cast<size_t>(tokens), n = T * static_cast<size_t>(top_k);
  Grouped& g = grouped_;
  grow(g.offsets, 2 * static_cast<size_t>(num_experts) + 2);  // offsets, active, num_active
  grow(g.order, n);
  grow(g.xb, T * hidden);
  grow(g.xp, T * hidden);
  grow(g.h, n * inter);
  grow(g.slots, n * hidden);
  if (shared_inter > 0) {
    grow(g.shared_g, T * shared_inter);
    grow(g.shared_u, T * shared_inter);
    grow(g.shared_h, T * shared_inter);
    grow(g.shared_out, T * hidden);
  }
  ensure_smem<true>(hidden);
  ensure_smem<false>(inter);
  moe_detail::ensure_grouped_w4_smem();
  grouped_tokens_ = std::max(grouped_tokens_, tokens);
  if (!side_) {
    DI_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
    DI_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    DI_CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
  }
}

MoeRunner::~MoeRunner() {
  if (fork_) cudaEventDestroy(fork_);
  if (join_) cudaEventDestroy(join_);
  if (side_) cudaStreamDestroy(side_);
}

void MoeRunner::run_grouped(const MoeArgs& a, cudaStream_t stream) {
  const int64_t T = a.tokens, H = a.hidden, I = a.inter;
  const int K = a.top_k, E = a.num_experts;
  if (T == 0) return;
  check_num_experts(E);
  if (!a.device_experts) fail("device_experts is null");
  if (!a.experts.empty() && static_cast<int>(a.experts.size()) != E)
    fail("experts.size() differs from num_experts");
  const int per = DeviceMatrix::per_load(a.expert_format);
  if (H % per != 0 || I % per != 0)
    fail("hidden and inter must be multiples of the expert format's 16-byte load");
  const size_t n = static_cast<size_t>(T) * K;
  const Grouped& g = grouped_;
  int32_t* offsets = reserved(g.offsets, 2 * static_cast<size_t>(E) + 2, "offsets");
  int32_t* active = offsets + E + 1;
  int32_t* num_active = active + E;
  int32_t* order = reserved(g.order, n, "order");
  // The GPU rounds expert inputs to bf16 (as run() does), here unless the caller did.
  const __nv_bfloat16* xb = a.xb;
  if (!xb) {
    __nv_bfloat16* b = reserved(g.xb, T * H, "xb");
    to_bf16(a.x, T * H, b, stream);
    xb = b;
  }
  // The shared expert reads only xb: in decode batches, whose launches are too small to fill the
  // GPU, it runs on side_ beside the routed kernels. Its own scratch and Linear's are touched by
  // nothing on `stream` meanwhile (the routed kernels use neither Linear nor cuBLASLt).
  const bool overlap = a.shared && side_ && stream != nullptr &&
                       T >= MOE_SHARED_OVERLAP_MIN_TOKENS && T <= MOE_SHARED_OVERLAP_MAX_TOKENS;
  float* shared = nullptr;
  const auto shared_expert = [&](cudaStream_t s) {
    const int64_t S = a.shared_inter;
    shared = reserved(g.shared_out, T * H, "shared_out");
    dense_expert(a, *a.shared, S, a.clamp_shared, xb, reserved(g.shared_g, T * S, "shared_g"),
                 reserved(g.shared_u, T * S, "shared_u"), reserved(g.shared_h, T * S, "shared_h"),
                 shared, s);
  };
  if (overlap) {
    DI_CUDA_CHECK(cudaEventRecord(fork_, stream));
    DI_CUDA_CHECK(cudaStreamWaitEvent(side_, fork_, 0));
    shared_expert(side_);
    DI_CUDA_CHECK(cudaEventRecord(join_, side_));
  }
  launch_kernel(group_kernel, 1, kGroupThreads, group_smem(E), stream, a.expert_ids,
                static_cast<int64_t>(n), E, offsets, active, num_active, order);

  GroupedArgs ga;
  ga.experts = a.device_experts;
  ga.offsets = offsets;
  ga.active = active;
  ga.num_active = num_active;
  ga.order = order;
  ga.weights = a.weights;
  ga.xb = xb;
  ga.h = reserved(g.h, n * I, "h");
  ga.slots = reserved(g.slots, n * H, "slots");
  ga.hidden = H;
  ga.inter = I;
  ga.top_k = K;
  ga.lim = a.swiglu_limit;
  ga.before = a.weight_before_w2;
  // Batch-invariant: the kernel (and with it each row's order of sums) must not depend on T; the
  // tensor-core forms' rows are independent of each other and of the rows per pass.
  const bool invariant = linear_.gemm().batch_invariant();
  const int64_t mma_from = invariant ? 1 : a.grouped_mma_min_tokens;
  const int64_t w4_from = invariant ? 1 : a.grouped_w4_min_tokens;
  if (T >= w4_from && a.expert_format == MatrixFormat::kMxfp4 &&
      moe_detail::grouped_w4_fits(H, I)) {
    if (!invariant && a.grouped_w4_wgmma && moe_detail::grouped_w4_wide(E, T, K)) {
      __nv_bfloat16* xp = reserved(g.xp, T * H, "xp");
      moe_detail::permute_k128(xb, T, H, xp, stream);
      ga.xp = xp;
    }
    const bool narrow_gemv = !invariant && a.grouped_w4_gemv;
    moe_detail::launch_grouped_w4(true, ga, E, T, narrow_gemv, stream);
    moe_detail::launch_grouped_w4(false, ga, E, T, narrow_gemv, stream);
  } else if (T >= mma_from && H % moe_detail::kMmaK == 0 && I % moe_detail::kMmaK == 0) {
    moe_detail::launch_grouped_mma(true, a.expert_format, ga, E, T, stream);
    moe_detail::launch_grouped_mma(false, a.expert_format, ga, E, T, stream);
  } else {
    const auto tiles = [](int64_t c) { return static_cast<unsigned>((c + kCols - 1) / kCols); };
    ensure_smem<true>(H);
    const unsigned rows = moe_detail::grouped_grid_rows(E, static_cast<int64_t>(n));
    const int per_pass = rows_per_pass(T);
    launch_experts<true>(a.expert_format, per_pass, dim3(tiles(I), rows), H, ga, stream);
    ensure_smem<false>(I);
    launch_experts<false>(a.expert_format, per_pass, dim3(tiles(H), rows), I, ga, stream);
  }

  if (overlap)
    DI_CUDA_CHECK(cudaStreamWaitEvent(stream, join_, 0));
  else if (a.shared)
    shared_expert(stream);
  moe_detail::combine_slots(ga.slots, shared, T, K, H, a.out, stream);
}

}  // namespace deepinfer::cuda

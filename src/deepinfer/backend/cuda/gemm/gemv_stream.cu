// The streaming GEMV. gemv_kernel gives each warp two columns and ends: a warp has four 16-byte
// words a lane in flight, then waits, reduces and exits, and wq_b (32768 x 1024 FP8, 32 MB) takes
// eight such waves, about half the HBM rate (docs/gpu_rmsnorm_gemv/). Here a grid of a few blocks
// an SM stays: each warp walks its columns (gw, gw + warps, ...) as a stream of 512-byte chunks of
// their rows, `kStages` chunks in flight in its own ring of shared memory, each brought by one
// bulk copy (no registers held while it flies) and signalled by an mbarrier. The first chunks
// are asked for before the PDL wait: weights only, so they arrive while the kernel ahead ends.
//
// The sums are gemv_kernel's: a lane takes the same 16-byte words of a share (k_begin + 16 lane
// + 512 j bytes) in the same order with the same expansion (weight_rows::expand8), the warp
// reduces each share by warp_reduce, and the shares add in order. So the bits match it for any
// grid, and a row's sums stay the same in any batch (decision 0014).
//
// Measured (docs/gpu_b1_step/run5_h100, H100): twice as slow as gemv_kernel at B=1, the step
// 3.54 ms against 2.55 (projections 0.909 against 0.460 ms), so it is off (GEMV_STREAM 0). A
// warp handles one chunk at a time, and each chunk's scale and x loads go out only when the
// chunk's turn comes, so their latency is paid chunk after chunk; the next try should bring the
// scales through the ring as well and multiply several chunks a wait.
#include "deepinfer/backend/cuda/bulk_copy.cuh"
#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/gemm/gemv_stream.h"
#include "deepinfer/backend/cuda/gemm/split_k.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/quant/weight_rows.cuh"
#include "deepinfer/backend/cuda/reduce.cuh"
#include "deepinfer/backend/cuda/smem_limit.h"

namespace deepinfer::cuda::gemv_detail {
namespace {

constexpr int kWarps = 8;
// Chunks in flight a warp: 6 KB a warp, 96 KB an SM at two blocks (an H100 needs about 40 KB an
// SM in flight to read at its rate).
#ifndef GEMV_STREAM_STAGES
#define GEMV_STREAM_STAGES 12
#endif
constexpr int kStages = GEMV_STREAM_STAGES;
#ifndef GEMV_STREAM_BLOCKS_PER_SM
#define GEMV_STREAM_BLOCKS_PER_SM 2
#endif
constexpr int kBlocksPerSm = GEMV_STREAM_BLOCKS_PER_SM;
constexpr int kWordsPerChunk = static_cast<int>(kChunkBytes / 512);  // a lane's, per chunk
constexpr size_t kRingBytes = size_t{kStages} * kChunkBytes;
constexpr size_t kSmemBytes = kWarps * (kRingBytes + kStages * sizeof(uint64_t));

// A position in a warp's stream: passes over x's rows outermost, then the warp's columns (gw,
// gw + warps, ...), then the chunks of a row, so a column's chunks come in k order. Walked by
// counters: a division an item would cost as much as the chunk's arithmetic.
struct Cursor {
  int64_t col;
  int pass, chunk;
};

struct Stream {
  int64_t gw, warps, rows;
  int chunks, passes;
  __device__ void advance(Cursor& c) const {
    if (++c.chunk < chunks) return;
    c.chunk = 0;
    c.col += warps;
    if (c.col < rows) return;
    c.col = gw;
    ++c.pass;
  }
};

template <MatrixFormat F>
__device__ inline int row_bytes(const DeviceMatrix& w) {
  return static_cast<int>(weight_rows::byte_of<F>(w.cols));
}

// Lane 0: chunk c.chunk of column c.col's row into `slot`.
template <MatrixFormat F>
__device__ inline void issue(const DeviceMatrix& w, int rb, const Cursor& c, uint8_t* slot,
                             uint64_t* bar) {
  const int off = c.chunk * static_cast<int>(kChunkBytes), left = rb - off;
  const uint32_t bytes = static_cast<uint32_t>(left < kChunkBytes ? left : kChunkBytes);
  bulk::copy(slot, static_cast<const uint8_t*>(w.data) + c.col * rb + off, bytes, bar);
}

// A warp's ring of chunks in shared memory, its barriers, and its stream of items.
struct WarpRing {
  uint8_t* ring;
  uint64_t* bars;
  Stream s;
  int rb;
};

template <MatrixFormat F, int R>
__device__ inline WarpRing warp_ring(const DeviceMatrix& w, int64_t n) {
  extern __shared__ __align__(128) uint8_t gs_sm[];
  const int warp = threadIdx.x >> 5;
  WarpRing g;
  g.ring = gs_sm + warp * kRingBytes;
  g.bars = reinterpret_cast<uint64_t*>(gs_sm + kWarps * kRingBytes) + warp * kStages;
  g.rb = row_bytes<F>(w);
  g.s.gw = int64_t{blockIdx.x} * kWarps + warp;
  g.s.warps = int64_t{gridDim.x} * kWarps;
  g.s.rows = w.rows;
  g.s.chunks = (g.rb + static_cast<int>(kChunkBytes) - 1) / static_cast<int>(kChunkBytes);
  g.s.passes = static_cast<int>((n + R - 1) / R);
  return g;
}

// Lane 0 of a warp with columns: its barriers, then its first kStages chunks (weights only, so
// this may run before the PDL wait).
template <MatrixFormat F, int R>
__device__ inline void start_ring(const DeviceMatrix& w, int64_t n) {
  const WarpRing g = warp_ring<F, R>(w, n);
  if ((threadIdx.x & 31) != 0 || g.s.gw >= w.rows) return;
  for (int i = 0; i < kStages; ++i) bulk::barrier_init(g.bars + i);
  bulk::fence_barrier_init();
  Cursor c{g.s.gw, 0, 0};
  for (int i = 0; i < kStages && c.pass < g.s.passes; ++i, g.s.advance(c))
    issue<F>(w, g.rb, c, g.ring + i * kChunkBytes, g.bars + i);
}

template <MatrixFormat F, int R>
__global__ void __launch_bounds__(kWarps * 32, kBlocksPerSm)
    gemv_stream_kernel(DeviceMatrix w, const __nv_bfloat16* x, int64_t ldx, int groups, int64_t n,
                       int shares, float* y) {
  pdl_grid_begin([&] { start_ring<F, R>(w, n); });
  constexpr int P = DeviceMatrix::per_load(F), CB = static_cast<int>(kChunkBytes);
  const int lane = threadIdx.x & 31;
  const WarpRing g = warp_ring<F, R>(w, n);
  const Stream& s = g.s;
  uint8_t* const ring = g.ring;
  uint64_t* const bars = g.bars;
  const int rb = g.rb;
  const bool active = s.gw < w.rows;
  if (!active) return;
  Cursor next{s.gw, 0, 0};  // the next chunk to ask for: the prologue asked for kStages
  for (int i = 0; i < kStages; ++i) s.advance(next);
  const int share_bytes = rb / shares;
  const int64_t group_rows = w.rows / groups;
  float acc[R] = {}, total[R] = {};
  weight_rows::Row row{};
  const __nv_bfloat16* xr = nullptr;
  int slot = 0;
  uint32_t parity = 0;
  for (Cursor cur{s.gw, 0, 0}; cur.pass < s.passes; s.advance(cur)) {
    const int off = cur.chunk * CB;
    const int64_t r0 = int64_t{cur.pass} * R;
    if (cur.chunk == 0) {
      row = weight_rows::row_of(w, cur.col);
      xr = x + (cur.col / group_rows) * w.cols + r0 * ldx;
    }
    if (off % share_bytes == 0)  // a share's first chunk
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    // The scales of this lane's words, asked for before the chunk's wait.
    uint32_t sb[kWordsPerChunk];
#pragma unroll
    for (int u = 0; u < kWordsPerChunk; ++u) {
      const int b = off + u * 512 + lane * 16;
      sb[u] = b < rb ? weight_rows::scale_bits<F>(row, int64_t{b / 16} * P) : 0u;
    }
    const int rn = n - r0 < R ? static_cast<int>(n - r0) : R;
    const uint8_t* chunk = ring + slot * CB;
    bulk::wait(bars + slot, parity);
#pragma unroll
    for (int u = 0; u < kWordsPerChunk; ++u) {
      const int b = off + u * 512 + lane * 16;
      if (b >= rb) break;
      const uint4 q = *reinterpret_cast<const uint4*>(chunk + u * 512 + lane * 16);
      const int64_t k = int64_t{b / 16} * P;
#pragma unroll
      for (int part = 0; part < P / 8; ++part) {
        float wf[8];
        weight_rows::expand8<F>(q, sb[u], part, wf);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r >= rn) break;
          float xf[8];
          weight_rows::unpack8(reinterpret_cast<const uint4*>(xr + r * ldx + k)[part], xf);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r] = fmaf(wf[e], xf[e], acc[r]);
        }
      }
    }
    __syncwarp();  // every lane is done with the slot
    if (next.pass < s.passes) {
      if (lane == 0) {
        bulk::fence_before_copy();
        issue<F>(w, rb, next, ring + slot * CB, bars + slot);
      }
      s.advance(next);
    }
    if (++slot == kStages) {
      slot = 0;
      parity ^= 1u;
    }
    const bool row_end = cur.chunk == s.chunks - 1;
    if (row_end || (off + CB) % share_bytes == 0) {  // a share's last chunk
      const bool first_share = off / share_bytes == 0;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float v = warp_reduce(acc[r], SumOp{});
        total[r] = first_share ? v : total[r] + v;
      }
    }
    if (row_end)
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (r < rn && lane == r) y[(r0 + r) * w.rows + cur.col] = total[r];
  }
}

template <MatrixFormat F, int R>
void launch_rows(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t ldx, int groups, int64_t n,
                 int shares, float* y, cudaStream_t stream) {
  static SmemLimit limit(reinterpret_cast<const void*>(gemv_stream_kernel<F, R>));
  limit.ensure(kSmemBytes);
  const int64_t want = (w.rows + kWarps - 1) / kWarps, most = int64_t{device_sms()} * kBlocksPerSm;
  const unsigned blocks = static_cast<unsigned>(want < most ? want : most);
  launch_kernel(gemv_stream_kernel<F, R>, blocks, kWarps * 32, kSmemBytes, stream, w, x, ldx,
                groups, n, shares, y);
}

template <MatrixFormat F>
void launch_format(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t ldx, int groups,
                   int64_t n, int shares, float* y, cudaStream_t stream) {
  switch (weight_rows::rows_per_pass(n)) {
    case 1:
      return launch_rows<F, 1>(w, x, ldx, groups, n, shares, y, stream);
    case 2:
      return launch_rows<F, 2>(w, x, ldx, groups, n, shares, y, stream);
    case 4:
      return launch_rows<F, 4>(w, x, ldx, groups, n, shares, y, stream);
    default:
      return launch_rows<F, weight_rows::kMaxRowsPerPass>(w, x, ldx, groups, n, shares, y, stream);
  }
}

}  // namespace

bool stream_fits(const DeviceMatrix& w, int shares) {
  if (!w.reads_in_vectors() || shares < 1) return false;
  const int64_t rb = w.cols / DeviceMatrix::per_load(w.format) * 16;  // whole 16-byte words
  return rb < (int64_t{1} << 30) &&
         (shares == 1 || (rb % shares == 0 && (rb / shares) % kChunkBytes == 0));
}

void gemv_stream(const DeviceMatrix& w, const __nv_bfloat16* x, int64_t ldx, int groups, int64_t n,
                 int shares, float* y, cudaStream_t stream) {
  switch (w.format) {
    case MatrixFormat::kBf16:
      return launch_format<MatrixFormat::kBf16>(w, x, ldx, groups, n, shares, y, stream);
    case MatrixFormat::kFp8Block:
      return launch_format<MatrixFormat::kFp8Block>(w, x, ldx, groups, n, shares, y, stream);
    case MatrixFormat::kMxfp4:
      return launch_format<MatrixFormat::kMxfp4>(w, x, ldx, groups, n, shares, y, stream);
  }
}

}  // namespace deepinfer::cuda::gemv_detail

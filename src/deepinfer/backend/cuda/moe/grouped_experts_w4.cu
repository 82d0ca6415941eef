// The grouped expert kernels for MXFP4 weights on tensor cores (W4A16), pipelined. A block owns
// (a column tile: 64 in decode, 32 at its fewest tokens, 128 in prefill; an expert) and walks K in
// 128-wide sub-tiles, 256-wide tiles in decode's 16-row passes (each weight row read a whole cache
// line a tile); prefill's 64-row passes take a grid row each, so a hot expert's passes run on
// several SMs at once. Each tile's stored bytes (64 per column and sub-tile, 4 E8M0 scales) and the
// expert's rows (bf16) are copied into shared memory by cp.async, stages() tiles ahead, so the
// loads of later tiles are in flight while this one multiplies. No bf16 copy of the weights is ever
// written: each thread reads its 16 packed bytes per column and sub-tile and expands them in
// registers straight into mma.sync m16n8k16 fragments.
//
// The trick that makes that possible: a dot product does not care in which order k is walked, so
// the mma's k positions are mapped onto the tile's k so that one thread's weight values are
// contiguous and cheap to expand. Thread t (= lane % 4) reads the tile's k [32t, 32t + 32): 16
// bytes and one E8M0 scale per column; word p of them holds k 32t + 8p + i in nibble i. In mma
// step 2p + h its k positions {2t, 2t+1} stand for nibbles (2h, 2h + 4) and {2t+8, 2t+9} for
// (2h + 1, 2h + 5): each pair sits 16 bits apart in the word, so one shift puts both where a
// bf16x2 wants them. The activation fragments follow the same map: 16-byte words of shared
// memory (swizzled against bank conflicts), their halves paired by byte permutes.
// Every expanded weight is the value weight_rows.cuh gives (stored value times its power-of-two
// scale, exact in bf16), so this kernel differs from the others only in the order of the sums.
#include <cuda_bf16.h>

#include <type_traits>

#include "deepinfer/backend/cuda/bulk_copy.cuh"
#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/mma_sync.cuh"
#include "deepinfer/backend/cuda/moe/expert_math.cuh"
#include "deepinfer/backend/cuda/moe/w4_fragments.cuh"
#include "deepinfer/backend/cuda/smem_limit.h"

namespace deepinfer::cuda::moe_detail {
namespace {

// Warps per block: a warp owns 16 (or 8) columns of each matrix, over the whole k, so the block's
// width changes only which SM sums a column, never the order of its sums. Decode's blocks are half
// as wide as prefill's: twice the blocks, two to four an SM, more weight bytes in flight. On an
// H100 (docs/gpu_pdl/) 4 took B=32 8.23 -> 7.96 ms and B=128 14.12 -> 13.64, B=1 the same;
// 2 was 0.03 ms faster at B=1 and slower at B=32 and 128.
#ifndef W4_DECODE_WARPS
#define W4_DECODE_WARPS 4
#endif
template <int MT>
constexpr int warps() {
  return MT == 1 ? W4_DECODE_WARPS : 8;
}
template <int MT>
constexpr int threads() {
  return 32 * warps<MT>();
}
// 8-column tiles a warp owns (mma n8 each): two share each activation fragment; one, for decode's
// fewest tokens, doubles the warps over the same columns. A column's sums keep their order
// either way (the same k steps), so the bits do not change.
template <int MT, int NT>
constexpr int block_n() {  // columns per block, of each matrix
  return 8 * NT * warps<MT>();
}
// Rows of a pass (staged activation rows): the narrow instance (<1, 1>, at most
// W4_NARROW_MAX_TOKENS rows an expert) takes 8, the mma's rows 0..7; its fragment halves for rows
// 8..15 are zero registers instead of shared-memory loads and byte permutes. A row of the mma's
// product reads only its own row of A, so rows 0..7 keep their bits.
template <int MT, int NT>
constexpr int x_rows() {
  return MT == 1 && NT == 1 ? 8 : 16 * MT;
}
// Tokens up to which decode takes one tile a warp: a token's 6 experts give the gate-up
// inter / 16 warps each, under two a scheduler on an H100, too few to hide the expansion's
// dependent ALU chains and the one tile in flight.
#ifndef W4_NARROW_MAX_TOKENS
#define W4_NARROW_MAX_TOKENS 4
#endif
static_assert(W4_NARROW_MAX_TOKENS <= 8, "x_rows: the narrow instance's one pass holds 8 rows");

#ifndef W4_MIN_BLOCKS
#define W4_MIN_BLOCKS 2
#endif
constexpr int kW4MinBlocks = W4_MIN_BLOCKS;
constexpr int kSub = 128;  // k per sub-tile: the unit of the k map below
// 1: a decode block (one pass an expert) asks L2 for all its weight rows and scales by bulk
// prefetch as soon as it knows its expert, so that its cp.async tiles would hit L2. 0: tile by
// tile only. Off: on an H100 (docs/gpu_b1_step/run7_h100) it made B=1's experts 0.671 -> 0.744
// ms and B=32's step 7.71 -> 8.74 (every block asks for its whole share at once: more than L2
// holds, so the lines are evicted before their tiles come).
#ifndef W4_L2_PREFETCH
#define W4_L2_PREFETCH 0
#endif
// k per tile of decode's 16-row passes: 256 reads each weight row 128 contiguous bytes a tile (a
// whole cache line) instead of 64.
#ifndef W4_DECODE_K
#define W4_DECODE_K 256
#endif
template <int MT>
constexpr int tile_k() {
  return MT == 1 ? W4_DECODE_K : kSub;
}

// One pipeline stage of KB-wide tiles. Plain offsets into dynamic shared memory (all 16-byte
// multiples).
template <int NW, int MT, int NT, int KB>
struct StageLayout {
  static constexpr int kColBytes = KB / 2;    // a column's packed bytes per tile
  static constexpr int kColScales = KB / 32;  // and its E8M0 bytes
  static constexpr int kChunks = KB / 8;      // 16-byte chunks of an activation row
  static constexpr int kBN = block_n<MT, NT>();
  static constexpr int kW = NW * kBN * kColBytes;       // [matrix][column][KB / 2 bytes]
  static constexpr int kS = NW * kBN * kColScales;      // [matrix][column] KB / 32 E8M0 bytes
  static constexpr int kX = x_rows<MT, NT>() * KB * 2;  // [row][KB / 8 swizzled chunks of 8 bf16]
  static constexpr int kBytes = kW + kS + kX;
};

// Stages of decode's 256-wide tiles: 4 (one block an SM) made B=32 and 128 9% slower than 2.
// W4_NARROW_STAGES: the same for the one-tile-a-warp instance only (up to W4_NARROW_MAX_TOKENS
// tokens; B=1 reads its 6 experts at about 38% of the H100's rate with one tile in flight a
// block). 3 and 4 made B=1 2.56 -> 2.59 and 2.63 ms on an H100 (docs/gpu_b1_step/run6_h100).
#ifndef W4_NARROW_STAGES
#define W4_NARROW_STAGES 2
#endif
template <int MT, int NT>
constexpr int stages() {
  if (MT == 1 && NT == 1 && tile_k<1>() != kSub) return W4_NARROW_STAGES;
  return MT == 1 ? (tile_k<1>() == kSub ? 4 : 2) : 3;
}

template <int NW, int MT, int NT>
constexpr size_t smem_bytes() {
  return size_t{StageLayout<NW, MT, NT, tile_k<MT>()>::kBytes} * stages<MT, NT>();
}

// Where chunk c of activation row r sits: the low two bits XORed with (c / 8, r % 2), so the
// eight lanes of a 16-byte load phase (rows g, g + 1 of one pair; t = 0..3) hit eight different
// bank groups.
__device__ inline int swizzle(int r, int c) { return c ^ ((((c >> 3) & 1) << 1) | (r & 1)); }

template <bool kGateUp, int MT, int NT>
__global__ void __launch_bounds__(threads<MT>(), kW4MinBlocks) w4_kernel(GroupedArgs a) {
  pdl_grid_begin();
  constexpr int NW = kGateUp ? 2 : 1, kRowsPerPass = x_rows<MT, NT>(), S = stages<MT, NT>(),
                KB = tile_k<MT>();
  constexpr int kThreads = threads<MT>(), kBN = block_n<MT, NT>();
  using L = StageLayout<NW, MT, NT, KB>;
  constexpr int kCpc = KB / 32;               // 16-byte weight chunks of a column per tile
  constexpr int kWc = kBN * kCpc / kThreads;  // of them a thread copies, per matrix
  constexpr int kChunks = L::kChunks, kXc = kRowsPerPass * kChunks / kThreads;
  static_assert(
      kThreads % kCpc == 0 && kThreads % kChunks == 0 && kXc * kThreads == kRowsPerPass * kChunks,
      "the copies must split evenly over the block's threads");
  extern __shared__ __align__(16) uint8_t w4_sm[];
  // Prefill's 64-row passes take a grid row each (pass_of_row); decode's 16-row passes stay in
  // one block per expert, whose column tile then stays in L2 for its next pass (the scan's
  // latency cost B=128 0.6 ms a step on an H100, docs/gpu_w4_split/).
  constexpr bool kSplit = MT > 1;
  const int2 item = kSplit ? pass_of_row(a, kRowsPerPass) : make_int2(grouped_expert(a), 0);
  const int e = item.x;
  if (e < 0) return;
  const int64_t first = a.offsets[e], rows = a.offsets[e + 1] - first;
  const int64_t m_end = kSplit ? item.y + 1 : rows;
  const ExpertPass<kGateUp> pass(a, e);
  const int64_t in = pass.in, out = pass.out;
  const int64_t n0 = int64_t{blockIdx.x} * kBN;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int tiles = static_cast<int>(in / KB);
  if constexpr (W4_L2_PREFETCH != 0 && !kSplit)
#pragma unroll
    for (int j = 0; j < NW; ++j) {  // the block's columns: one run of rows, one of scales
      const DeviceMatrix& m = *pass.mats[j];
      const int64_t cols = n0 + kBN < m.rows ? kBN : m.rows - n0;
      if (cols <= 0) continue;
      bulk::prefetch_l2_run(static_cast<const uint8_t*>(m.data) + n0 * (m.cols / 2),
                            cols * (m.cols / 2));
      bulk::prefetch_l2_run(m.mx_scale + n0 * (m.cols / 32), cols * (m.cols / 32));
    }
  if (tid == 0)
    for (int j = 0; j < NW; ++j) {
      const DeviceMatrix& m = *pass.mats[j];
      if (reinterpret_cast<uintptr_t>(m.data) % 16 != 0 ||
          reinterpret_cast<uintptr_t>(m.mx_scale) % 4 != 0) {
        printf("moe: expert %d's MXFP4 weights at %p (scales %p) are not 16 (4)-byte aligned\n", e,
               m.data, m.mx_scale);
        __trap();
      }
    }

  // This thread's copies per stage: weight chunks (columns tid / kCpc + h * kThreads / kCpc,
  // chunk tid % kCpc) and kSc copies of 4 scale bytes (copy q = tid + i * kThreads: column
  // q / (KB / 128), sub-tile q % (KB / 128)).
  const uint8_t* wsrc[NW][kWc];
  bool wvalid[NW][kWc];
#pragma unroll
  for (int j = 0; j < NW; ++j)
#pragma unroll
    for (int h = 0; h < kWc; ++h) {
      const int col = tid / kCpc + h * (kThreads / kCpc);
      const DeviceMatrix& m = *pass.mats[j];
      wvalid[j][h] = n0 + col < m.rows;
      wsrc[j][h] = static_cast<const uint8_t*>(m.data) +
                   (wvalid[j][h] ? (n0 + col) * (m.cols / 2) + 16 * (tid % kCpc) : 0);
    }
  constexpr int kSq = NW * kBN * (KB / kSub);  // 4-byte scale copies per stage
  constexpr int kSc = (kSq + kThreads - 1) / kThreads;
  const uint8_t* ssrc[kSc];
  bool scopy[kSc], svalid[kSc];
#pragma unroll
  for (int i = 0; i < kSc; ++i) {
    const int q = tid + i * kThreads, c = q / (KB / kSub), part = q % (KB / kSub);
    scopy[i] = q < kSq;
    const DeviceMatrix& m = *pass.mats[scopy[i] ? c / kBN : 0];
    const int64_t n = n0 + c % kBN;
    svalid[i] = scopy[i] && n < m.rows;
    ssrc[i] = m.mx_scale + (svalid[i] ? n * (m.cols / 32) + 4 * part : 0);
  }

  for (int64_t m0 = item.y; m0 < m_end; m0 += kRowsPerPass) {
    const int rn = rows - m0 < kRowsPerPass ? static_cast<int>(rows - m0) : kRowsPerPass;
    // This thread's activation copies: rows tid / kChunks + i * kThreads / kChunks, chunk
    // tid % kChunks.
    const __nv_bfloat16* xsrc[kXc];
    const int xc = tid % kChunks;
#pragma unroll
    for (int i = 0; i < kXc; ++i) {
      const int r = tid / kChunks + i * (kThreads / kChunks);
      const int64_t gr = first + m0 + (r < rn ? r : 0);
      xsrc[i] = kGateUp ? a.xb + int64_t{a.order[gr] / a.top_k} * in : a.h + gr * in;
      xsrc[i] += 8 * xc;
    }
    const auto load = [&](int tile) {
      uint8_t* st = w4_sm + (tile % S) * L::kBytes;
      const int64_t k0 = int64_t{tile} * KB;
#pragma unroll
      for (int j = 0; j < NW; ++j)
#pragma unroll
        for (int h = 0; h < kWc; ++h)
          cp_async16(st + (j * kBN + tid / kCpc + h * (kThreads / kCpc)) * L::kColBytes +
                         16 * (tid % kCpc),
                     wsrc[j][h] + k0 / 2, wvalid[j][h]);
#pragma unroll
      for (int i = 0; i < kSc; ++i)
        if (scopy[i]) copy4(st + L::kW + 4 * (tid + i * kThreads), ssrc[i] + k0 / 32, svalid[i]);
#pragma unroll
      for (int i = 0; i < kXc; ++i) {
        const int r = tid / kChunks + i * (kThreads / kChunks);
        cp_async16(st + L::kW + L::kS + (r * kChunks + swizzle(r, xc)) * 16, xsrc[i] + k0, r < rn);
      }
    };

    float acc[NW][NT][MT][4] = {};
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
      if (s < tiles) load(s);
      cp_async_commit();
    }
    for (int tile = 0; tile < tiles; ++tile) {
      cp_async_wait<S - 2>();
      __syncthreads();  // the tile is in; every warp is done with the stage the next load takes
      if (tile + S - 1 < tiles) load(tile + S - 1);
      cp_async_commit();
      const uint8_t* st = w4_sm + (tile % S) * L::kBytes;
#pragma unroll
      for (int sub = 0; sub < KB / kSub; ++sub) {  // 128-k sub-tiles in k order
        uint4 raw[NW][NT];
        uint32_t first[NW][NT], sbytes = 0;  // sbytes: byte NT j + nt is that column's E8M0
#pragma unroll
        for (int j = 0; j < NW; ++j)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const int col = j * kBN + warp * 8 * NT + nt * 8 + g;
            raw[j][nt] =
                *reinterpret_cast<const uint4*>(st + col * L::kColBytes + 64 * sub + 16 * t);
            const uint32_t sb = st[L::kW + col * L::kColScales + 4 * sub + t];
            first[j][nt] = first_factor(sb);
            sbytes |= sb << (8 * (NT * j + nt));
          }
        // Past 128 only in a synthetic checkpoint: then the warp's columns all take the second
        // multiply (a warp-uniform branch, so the common path carries no select).
        const bool twice = __any_sync(0xffffffffu, __vcmpgtu4(sbytes, 0x80808080u) != 0);
        // Row g's chunk 16 sub + 4t + p sits at swizzle's 16 sub + 4t + (p ^ x): rows mt * 16 + g
        // (+ 8) share g's parity, chunks 4t + p share t's bit 3.
        const uint8_t* xs = st + L::kW + L::kS + (g * kChunks + 16 * sub + 4 * t) * 16;
        const int x16 = (((t >> 1) & 1) << 1 | (g & 1)) << 4;
        const auto steps = [&](auto twice_tag) {
          constexpr bool kTwice = decltype(twice_tag)::value;
          uint32_t second[NW][NT];
#pragma unroll
          for (int j = 0; j < NW; ++j)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
              second[j][nt] = kTwice ? second_factor((sbytes >> (8 * (NT * j + nt))) & 0xffu) : 0;
#pragma unroll
          for (int p = 0; p < 4; ++p) {  // mma steps 2p and 2p + 1: chunk 4t + p of each row
            uint32_t b[2][NW][NT][2];
#pragma unroll
            for (int j = 0; j < NW; ++j)
#pragma unroll
              for (int nt = 0; nt < NT; ++nt) {
                const uint32_t w = reinterpret_cast<const uint32_t*>(&raw[j][nt])[p];
                const uint32_t f = first[j][nt], sf = second[j][nt];
                b[0][j][nt][0] = expand_pair<0, kTwice>(w, f, sf);
                b[0][j][nt][1] = expand_pair<1, kTwice>(w, f, sf);
                b[1][j][nt][0] = expand_pair<2, kTwice>(w, f, sf);
                b[1][j][nt][1] = expand_pair<3, kTwice>(w, f, sf);
              }
            const uint8_t* xp = xs + ((16 * p) ^ x16);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              if (mt * 16 >= rn) break;
              const uint4 x0 = *reinterpret_cast<const uint4*>(xp + mt * 16 * kChunks * 16);
              const uint4 x1 =
                  kRowsPerPass > 8
                      ? *reinterpret_cast<const uint4*>(xp + (mt * 16 + 8) * kChunks * 16)
                      : make_uint4(0, 0, 0, 0);
              // Values k 0..7 of the chunk are x.x = (0, 1), .y = (2, 3), .z = (4, 5), .w = (6, 7):
              // step h pairs (2h, 2h + 4) and (2h + 1, 2h + 5).
              const uint32_t fa[2][4] = {
                  {__byte_perm(x0.x, x0.z, 0x5410), __byte_perm(x1.x, x1.z, 0x5410),
                   __byte_perm(x0.x, x0.z, 0x7632), __byte_perm(x1.x, x1.z, 0x7632)},
                  {__byte_perm(x0.y, x0.w, 0x5410), __byte_perm(x1.y, x1.w, 0x5410),
                   __byte_perm(x0.y, x0.w, 0x7632), __byte_perm(x1.y, x1.w, 0x7632)}};
#pragma unroll
              for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int j = 0; j < NW; ++j)
#pragma unroll
                  for (int nt = 0; nt < NT; ++nt)
                    mma_bf16_16816(acc[j][nt][mt], fa[h], b[h][j][nt][0], b[h][j][nt][1]);
            }
          }
        };
        if (twice)
          steps(std::true_type{});
        else
          steps(std::false_type{});
      }
    }
    cp_async_wait<0>();
    if (!kSplit) __syncthreads();  // the stages are free for the next pass

      // Epilogue from the fragments: c[0..1] row g, columns 2t, 2t + 1; c[2..3] row g + 8.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const int r = mt * 16 + g + 8 * hr;
          const int64_t n = n0 + warp * 8 * NT + nt * 8 + 2 * t;
          if (r >= rn || n >= out) continue;
          const int64_t gr = first + m0 + r;
          const int32_t s = a.order[gr];
          if constexpr (kGateUp) {
            const float wt = a.before ? a.weights[s] : 1.0f;
            const float* gv = &acc[0][nt][mt][2 * hr];
            const float* uv = &acc[NW - 1][nt][mt][2 * hr];
            __nv_bfloat162 v;
            v.x = swiglu_bf16(gv[0], uv[0], true, a.lim, wt);
            v.y = swiglu_bf16(gv[1], uv[1], true, a.lim, wt);
            *reinterpret_cast<__nv_bfloat162*>(a.h + gr * a.inter + n) = v;
          } else {
            const float f = a.before ? 1.0f : a.weights[s];
            const float* c = &acc[0][nt][mt][2 * hr];
            *reinterpret_cast<float2*>(a.slots + int64_t{s} * a.hidden + n) =
                make_float2(c[0] * f, c[1] * f);
          }
        }
  }
}

template <bool kGateUp, int MT, int NT>
SmemLimit& limit_of() {
  static SmemLimit limit(reinterpret_cast<const void*>(w4_kernel<kGateUp, MT, NT>));
  return limit;
}

template <bool kGateUp, int MT, int NT>
void launch(int64_t out, int64_t passes, const GroupedArgs& a, cudaStream_t stream) {
  constexpr size_t smem = smem_bytes < kGateUp ? 2 : 1, MT, NT > ();
  limit_of<kGateUp, MT, NT>().ensure(smem);
  constexpr int kBN = block_n<MT, NT>();
  const dim3 grid(static_cast<unsigned>((out + kBN - 1) / kBN), static_cast<unsigned>(passes));
  launch_kernel(w4_kernel<kGateUp, MT, NT>, grid, threads<MT>(), smem, stream, a);
}

}  // namespace

bool grouped_w4_fits(int64_t hidden, int64_t inter) {
  constexpr int k = tile_k<1>() > kSub ? tile_k<1>() : kSub;
  return hidden % k == 0 && inter % k == 0;
}

void ensure_grouped_w4_smem() {
  limit_of<true, 1, 1>().ensure(smem_bytes<2, 1, 1>());
  limit_of<true, 1, 2>().ensure(smem_bytes<2, 1, 2>());
  limit_of<true, 4, 2>().ensure(smem_bytes<2, 4, 2>());
  limit_of<false, 1, 1>().ensure(smem_bytes<1, 1, 1>());
  limit_of<false, 1, 2>().ensure(smem_bytes<1, 1, 2>());
  limit_of<false, 4, 2>().ensure(smem_bytes<1, 4, 2>());
  ensure_grouped_wgmma_smem();
  ensure_grouped_w4_gemv_smem();
}

void launch_grouped_w4(bool gate_up, const GroupedArgs& a, int num_experts, int64_t tokens,
                       bool narrow_gemv, cudaStream_t stream) {
  const int64_t out = gate_up ? a.inter : a.hidden;
  // 64-row passes once an expert averages more than 16 rows (prefill chunks).
  const int64_t slots = tokens * a.top_k;
  const bool wide = grouped_w4_wide(num_experts, tokens, a.top_k);
  // Wide: a grid row per (expert, pass); the sum over experts of ceil(rows / 64) is at most the
  // active experts plus slots / 64. Else a grid row per expert.
  if (wide && a.xp) return launch_grouped_wgmma(gate_up, a, num_experts, tokens, stream);
  const int64_t passes = grouped_grid_rows(num_experts, slots) + (wide ? slots / 64 : 0);
  const bool narrow = !wide && tokens <= W4_NARROW_MAX_TOKENS;
  if (narrow && narrow_gemv) return launch_grouped_w4_gemv(gate_up, a, num_experts, tokens, stream);
  if (gate_up)
    wide     ? launch<true, 4, 2>(out, passes, a, stream)
    : narrow ? launch<true, 1, 1>(out, passes, a, stream)
             : launch<true, 1, 2>(out, passes, a, stream);
  else
    wide     ? launch<false, 4, 2>(out, passes, a, stream)
    : narrow ? launch<false, 1, 1>(out, passes, a, stream)
             : launch<false, 1, 2>(out, passes, a, stream);
}

}  // namespace deepinfer::cuda::moe_detail

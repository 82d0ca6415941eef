// The grouped expert kernels for MXFP4 weights on tensor cores (W4A16), pipelined. A block owns
// (a 128-column tile, an expert) and walks K in 128-wide tiles. Each tile's stored bytes (64 per
// column, 4 E8M0 scales) and the expert's rows (bf16) are copied into shared memory by cp.async,
// kStages tiles ahead, so the loads of later tiles are in flight while this one multiplies. No
// bf16 copy of the weights is ever written: each thread reads its 16 packed bytes per column and
// expands them in registers straight into mma.sync m16n8k16 fragments.
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

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/moe/expert_math.cuh"
#include "deepinfer/backend/cuda/smem_limit.h"

namespace deepinfer::cuda::moe_detail {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kBN = 16 * kWarps;  // columns per block, of each matrix: a warp owns 16
#ifndef W4_MIN_BLOCKS
#define W4_MIN_BLOCKS 2
#endif
constexpr int kW4MinBlocks = W4_MIN_BLOCKS;
constexpr int kBK = 128;            // k per tile
constexpr int kColBytes = kBK / 2;  // a column's packed bytes per tile
constexpr int kChunks = kBK / 8;    // 16-byte chunks of an activation row per tile

// One pipeline stage. Plain offsets into dynamic shared memory (all 16-byte multiples).
template <int NW, int MT>
struct StageLayout {
  static constexpr int kW = NW * kBN * kColBytes;  // [matrix][column][64 bytes]
  static constexpr int kS = NW * kBN * 4;          // [matrix][column] 4 E8M0 bytes
  static constexpr int kX = 16 * MT * kBK * 2;     // [row][16 swizzled chunks of 8 bf16]
  static constexpr int kBytes = kW + kS + kX;
};

template <int MT>
constexpr int stages() {
  return MT == 1 ? 4 : 3;
}

template <int NW, int MT>
constexpr size_t smem_bytes() {
  return size_t{StageLayout<NW, MT>::kBytes} * stages<MT>();
}

// Where chunk c of activation row r sits: the low two bits XORed with (c / 8, r % 2), so the
// eight lanes of a 16-byte load phase (rows g, g + 1 of one pair; t = 0..3) hit eight different
// bank groups.
__device__ inline int swizzle(int r, int c) { return c ^ ((((c >> 3) & 1) << 1) | (r & 1)); }

__device__ inline uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// cp.async with a source size: 0 fills the destination with zeros and reads nothing.
__device__ inline void copy16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ inline void copy4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 4 : 0));
}
__device__ inline void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ inline void wait_pending() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ inline void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A column's E8M0 scale b as the factor that makes a raw pair (below) exact: 2^(b - 1), a bf16
// for b <= 128 (every real checkpoint; b = 0 is 2^-127, as weight_rows::e8m0). Past that, 2^126
// (the raw bits' own offset) and then the scale itself (NaN for 255), a second multiply.
__device__ inline uint32_t bf16x2_bits(uint32_t half) { return half | (half << 16); }
__device__ inline uint32_t first_factor(uint32_t b) {
  return bf16x2_bits(b <= 128 ? (b + 126) << 7 : 253u << 7);
}
__device__ inline uint32_t second_factor(uint32_t b) {
  return bf16x2_bits(b <= 128 ? 0x3f80u : b == 255 ? 0x7fc0u : b << 7);
}
__device__ inline uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  const __nv_bfloat162 r = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                   *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const uint32_t*>(&r);
}

// Nibbles I and I + 4 of w (E2M1) -> a bf16x2 of their raw bits: sign to bit 15 (31), exponent
// and mantissa to bits 6..8 (22..24), so the bits read as value * 2^-126 (0.5 is the subnormal
// 2^-127); then scaled exactly. `b`: the E8M0 byte, read only when `twice` (some column's b is
// past 128).
template <int I>
__device__ inline uint32_t expand_pair(uint32_t w, uint32_t first, bool twice, uint32_t b) {
  const uint32_t v = w << (12 - 4 * I);
  const uint32_t r = mul_bf16x2((v & 0x80008000u) | ((v >> 6) & 0x01C001C0u), first);
  return twice ? mul_bf16x2(r, second_factor(b)) : r;
}

template <bool kGateUp, int MT>
__global__ void __launch_bounds__(kThreads, kW4MinBlocks) w4_kernel(GroupedArgs a) {
  constexpr int NW = kGateUp ? 2 : 1, kRowsPerPass = 16 * MT, S = stages<MT>();
  using L = StageLayout<NW, MT>;
  extern __shared__ __align__(16) uint8_t w4_sm[];
  const int e = grouped_expert(a);
  if (e < 0) return;
  const int64_t first = a.offsets[e], rows = a.offsets[e + 1] - first;
  if (rows == 0) return;
  const ExpertPass<kGateUp> pass(a, e);
  const int64_t in = pass.in, out = pass.out;
  const int64_t n0 = int64_t{blockIdx.x} * kBN;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int tiles = static_cast<int>(in / kBK);
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

  // This thread's copies per stage: weight chunks (column tid / 4 and tid / 4 + 64, chunk tid % 4)
  // and, for the first NW * 128 threads, one column's four scale bytes.
  const uint8_t* wsrc[NW][2];
  bool wvalid[NW][2];
#pragma unroll
  for (int j = 0; j < NW; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = tid / 4 + 64 * h;
      const DeviceMatrix& m = *pass.mats[j];
      wvalid[j][h] = n0 + col < m.rows;
      wsrc[j][h] = static_cast<const uint8_t*>(m.data) +
                   (wvalid[j][h] ? (n0 + col) * (m.cols / 2) + 16 * (tid % 4) : 0);
    }
  const uint8_t* ssrc = nullptr;
  bool svalid = false;
  if (tid < NW * kBN) {
    const DeviceMatrix& m = *pass.mats[tid / kBN];
    const int64_t n = n0 + tid % kBN;
    svalid = n < m.rows;
    ssrc = m.mx_scale + (svalid ? n * (m.cols / 32) : 0);
  }

  for (int64_t m0 = 0; m0 < rows; m0 += kRowsPerPass) {
    const int rn = rows - m0 < kRowsPerPass ? static_cast<int>(rows - m0) : kRowsPerPass;
    // This thread's activation copies: rows tid / 16 + 16 i, chunk tid % 16.
    const __nv_bfloat16* xsrc[MT];
    const int xc = tid % kChunks;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const int r = tid / kChunks + 16 * i;
      const int64_t gr = first + m0 + (r < rn ? r : 0);
      xsrc[i] = kGateUp ? a.xb + int64_t{a.order[gr] / a.top_k} * in : a.h + gr * in;
      xsrc[i] += 8 * xc;
    }
    const auto load = [&](int tile) {
      uint8_t* st = w4_sm + (tile % S) * L::kBytes;
      const int64_t k0 = int64_t{tile} * kBK;
#pragma unroll
      for (int j = 0; j < NW; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          copy16(st + (j * kBN + tid / 4 + 64 * h) * kColBytes + 16 * (tid % 4),
                 wsrc[j][h] + k0 / 2, wvalid[j][h]);
      if (tid < NW * kBN) copy4(st + L::kW + 4 * tid, ssrc + k0 / 32, svalid);
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const int r = tid / kChunks + 16 * i;
        copy16(st + L::kW + L::kS + (r * kChunks + swizzle(r, xc)) * 16, xsrc[i] + k0, r < rn);
      }
    };

    float acc[NW][2][MT][4] = {};
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
      if (s < tiles) load(s);
      commit();
    }
    for (int tile = 0; tile < tiles; ++tile) {
      wait_pending<S - 2>();
      __syncthreads();  // the tile is in; every warp is done with the stage the next load takes
      if (tile + S - 1 < tiles) load(tile + S - 1);
      commit();
      const uint8_t* st = w4_sm + (tile % S) * L::kBytes;
      uint4 raw[NW][2];
      uint32_t first[NW][2], sbytes = 0;  // sbytes: byte 2j + nt is that column's E8M0
#pragma unroll
      for (int j = 0; j < NW; ++j)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const int col = j * kBN + warp * 16 + nt * 8 + g;
          raw[j][nt] = *reinterpret_cast<const uint4*>(st + col * kColBytes + 16 * t);
          const uint32_t sb = st[L::kW + 4 * col + t];
          first[j][nt] = first_factor(sb);
          sbytes |= sb << (8 * (2 * j + nt));
        }
      // Past 128 only in a synthetic checkpoint: then every column takes the second multiply.
      const bool twice = __vcmpgtu4(sbytes, 0x80808080u) != 0;
      const uint8_t* xs = st + L::kW + L::kS;
#pragma unroll
      for (int p = 0; p < 4; ++p) {  // mma steps 2p and 2p + 1: chunk 4t + p of each row
        uint32_t b[2][NW][2][2];
#pragma unroll
        for (int j = 0; j < NW; ++j)
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            const uint32_t w = reinterpret_cast<const uint32_t*>(&raw[j][nt])[p];
            const uint32_t sb = (sbytes >> (8 * (2 * j + nt))) & 0xffu;
            b[0][j][nt][0] = expand_pair<0>(w, first[j][nt], twice, sb);
            b[0][j][nt][1] = expand_pair<1>(w, first[j][nt], twice, sb);
            b[1][j][nt][0] = expand_pair<2>(w, first[j][nt], twice, sb);
            b[1][j][nt][1] = expand_pair<3>(w, first[j][nt], twice, sb);
          }
        const int c = 4 * t + p;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if (mt * 16 >= rn) break;
          const int r0 = mt * 16 + g, r1 = r0 + 8;
          const uint4 x0 =
              *reinterpret_cast<const uint4*>(xs + (r0 * kChunks + swizzle(r0, c)) * 16);
          const uint4 x1 =
              *reinterpret_cast<const uint4*>(xs + (r1 * kChunks + swizzle(r1, c)) * 16);
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
              for (int nt = 0; nt < 2; ++nt)
                mma(acc[j][nt][mt], fa[h], b[h][j][nt][0], b[h][j][nt][1]);
        }
      }
    }
    wait_pending<0>();
    __syncthreads();  // the stages are free for the next pass

    // Epilogue from the fragments: c[0..1] row g, columns 2t, 2t + 1; c[2..3] row g + 8.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const int r = mt * 16 + g + 8 * hr;
          const int64_t n = n0 + warp * 16 + nt * 8 + 2 * t;
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

template <bool kGateUp, int MT>
SmemLimit& limit_of() {
  static SmemLimit limit(reinterpret_cast<const void*>(w4_kernel<kGateUp, MT>));
  return limit;
}

template <bool kGateUp, int MT>
void launch(dim3 grid, const GroupedArgs& a, cudaStream_t stream) {
  constexpr size_t smem = smem_bytes < kGateUp ? 2 : 1, MT > ();
  limit_of<kGateUp, MT>().ensure(smem);
  w4_kernel<kGateUp, MT><<<grid, kThreads, smem, stream>>>(a);
  DI_CUDA_LAUNCH_CHECK();
}

}  // namespace

bool grouped_w4_fits(int64_t hidden, int64_t inter) {
  return hidden % kBK == 0 && inter % kBK == 0;
}

void ensure_grouped_w4_smem() {
  limit_of<true, 1>().ensure(smem_bytes<2, 1>());
  limit_of<true, 4>().ensure(smem_bytes<2, 4>());
  limit_of<false, 1>().ensure(smem_bytes<1, 1>());
  limit_of<false, 4>().ensure(smem_bytes<1, 4>());
}

void launch_grouped_w4(bool gate_up, const GroupedArgs& a, int num_experts, int64_t tokens,
                       cudaStream_t stream) {
  const int64_t out = gate_up ? a.inter : a.hidden;
  const dim3 grid(static_cast<unsigned>((out + kBN - 1) / kBN),
                  grouped_grid_rows(num_experts, tokens * a.top_k));
  // 64-row passes once an expert averages more than 16 rows (prefill chunks).
  const bool wide = tokens * a.top_k > int64_t{16} * num_experts;
  if (gate_up)
    wide ? launch<true, 4>(grid, a, stream) : launch<true, 1>(grid, a, stream);
  else
    wide ? launch<false, 4>(grid, a, stream) : launch<false, 1>(grid, a, stream);
}

}  // namespace deepinfer::cuda::moe_detail

// The grouped expert kernels for MXFP4 weights on tensor cores (W4A16), pipelined. A block owns
// (a 128-column tile, an expert) and walks K in 128-wide tiles. Each tile's stored bytes (64 per
// column, 4 E8M0 scales) and the expert's rows (bf16) are copied into shared memory by cp.async,
// kStages tiles ahead, so the loads of later tiles are in flight while this one multiplies. No
// bf16 copy of the weights is ever written: each thread reads its 16 packed bytes per column and
// expands them in registers straight into mma.sync m16n8k16 fragments.
//
// The trick that makes that possible: a dot product does not care in which order k is walked, so
// the mma's k positions are mapped onto the tile's k so that one thread's weight values are
// contiguous. In mma step ks (0..7) the thread with t = lane % 4 takes k positions {2t, 2t+1,
// 2t+8, 2t+9}; they stand for tile k 32t + 4ks + {0, 1, 2, 3}. So thread t reads exactly the
// tile's k [32t, 32t + 32): 16 bytes and one E8M0 scale per column. The activation fragments
// follow the same map, read as 16-byte words of shared memory (swizzled against bank conflicts).
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
constexpr int kBN = 16 * kWarps;    // columns per block, of each matrix: a warp owns 16
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

// A column's E8M0 scale as two bf16x2 factors whose product scales a raw expanded pair (below)
// exactly: one factor 2^(b - 1) where that is a normal bf16 (b in 1..128, every real checkpoint),
// else 2^126 then the scale itself (2^-127 for b = 0, NaN for 255, as weight_rows::e8m0).
struct Scale {
  __nv_bfloat162 first, second;
};
__device__ inline __nv_bfloat162 bf16x2_bits(uint32_t half) {
  const uint32_t w = half | (half << 16);
  return *reinterpret_cast<const __nv_bfloat162*>(&w);
}
__device__ inline Scale scale_of(uint32_t b) {
  if (b >= 1 && b <= 128) return {bf16x2_bits((b + 126) << 7), bf16x2_bits(0x3f80u)};
  const uint32_t s = b == 0 ? 0x0040u : b == 255 ? 0x7fc0u : b << 7;
  return {bf16x2_bits(253u << 7), bf16x2_bits(s)};
}

// Two E2M1 nibbles (the even k in the low one) -> a bf16x2 of their raw bits: sign to bit 15,
// exponent and mantissa to bits 6..8, so the bits read as value * 2^-126 (0.5 is the subnormal
// 2^-127). Scale's factors then make it exact.
__device__ inline uint32_t fp4x2_raw(uint32_t x) {
  return ((x & 0x7u) << 6) | ((x & 0x8u) << 12) | ((x & 0x70u) << 18) | ((x & 0x80u) << 24);
}
__device__ inline uint32_t expand_pair(uint32_t x, const Scale& s) {
  const uint32_t raw = fp4x2_raw(x);
  __nv_bfloat162 v = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&raw), s.first);
  v = __hmul2(v, s.second);
  return *reinterpret_cast<const uint32_t*>(&v);
}

template <bool kGateUp, int MT>
__global__ void __launch_bounds__(kThreads, 2) w4_kernel(GroupedArgs a) {
  constexpr int NW = kGateUp ? 2 : 1, kRowsPerPass = 16 * MT, S = stages<MT>();
  using L = StageLayout<NW, MT>;
  extern __shared__ __align__(16) uint8_t w4_sm[];
  const int e = blockIdx.y;
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
      Scale sc[NW][2];
#pragma unroll
      for (int j = 0; j < NW; ++j)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const int col = j * kBN + warp * 16 + nt * 8 + g;
          raw[j][nt] = *reinterpret_cast<const uint4*>(st + col * kColBytes + 16 * t);
          sc[j][nt] = scale_of(st[L::kW + 4 * col + t]);
        }
      const uint8_t* xs = st + L::kW + L::kS;
#pragma unroll
      for (int p = 0; p < 4; ++p) {  // mma steps 2p and 2p + 1: chunk 4t + p of each row
        uint32_t b[2][NW][2][2];
#pragma unroll
        for (int j = 0; j < NW; ++j)
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            const uint32_t w = reinterpret_cast<const uint32_t*>(&raw[j][nt])[p];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              b[h][j][nt][0] = expand_pair((w >> (16 * h)) & 0xffu, sc[j][nt]);
              b[h][j][nt][1] = expand_pair((w >> (16 * h + 8)) & 0xffu, sc[j][nt]);
            }
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
          const uint32_t fa[2][4] = {{x0.x, x1.x, x0.y, x1.y}, {x0.z, x1.z, x0.w, x1.w}};
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
  const dim3 grid(static_cast<unsigned>((out + kBN - 1) / kBN), static_cast<unsigned>(num_experts));
  // 64-row passes once an expert averages more than 16 rows (prefill chunks).
  const bool wide = tokens * a.top_k > int64_t{16} * num_experts;
  if (gate_up)
    wide ? launch<true, 4>(grid, a, stream) : launch<true, 1>(grid, a, stream);
  else
    wide ? launch<false, 4>(grid, a, stream) : launch<false, 1>(grid, a, stream);
}

}  // namespace deepinfer::cuda::moe_detail

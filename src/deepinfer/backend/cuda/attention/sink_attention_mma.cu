// sink_attention on tensor cores for V4's shape (64 heads sharing one 512-dim K=V row per key):
// per query, S = Q K^T is a 64 x keys GEMM and O = P K a 64 x 512 one, so a block per query runs
// both as bf16 mma.sync with fp32 accumulation and an online softmax (FlashAttention's), the
// sink joining the denominator at the end. Same keys, order of visit and sink as
// sink_attention.cu; the products are rounded to bf16 (Q, K and the probabilities), as the GEMMs
// of the GPU forward round their activations.
//
// Block: 8 warps. Warp w owns heads 16 (w % 4) .. + 15 and, per 64-key tile, scores keys
// 32 (w / 4) .. + 31 of it, then accumulates output dims 256 (w / 4) .. + 255. The two warps of a
// head group meet through shared memory for each tile's row maxima and sums (both keep the same
// running max and sum). Shared memory: Q (64 KB) and the tile's keys (64 KB) as bf16, the tile's
// probabilities (8 KB), each row's 16-byte chunks XOR-swizzled by row so that ldmatrix reads
// eight rows without bank conflicts.
#include <cfloat>
#include <cstdint>

#include "deepinfer/backend/cuda/attention/sink_attention_mma.h"
#include "deepinfer/backend/cuda/attention/sink_keys.cuh"
#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/mma_sync.cuh"
#include "deepinfer/backend/cuda/smem_limit.h"

namespace deepinfer::cuda {
namespace {

constexpr int kHeads = 64, kDim = 512, kTile = 64;
constexpr int kThreads = 256;
constexpr int kDimChunks = kDim / 8;    // 16-byte chunks of a bf16 Q or K row
constexpr int kTileChunks = kTile / 8;  // ... of a probability row
#ifndef SINK_MMA_LOAD_BATCH
#define SINK_MMA_LOAD_BATCH 16
#endif
constexpr int kBatch = SINK_MMA_LOAD_BATCH;  // float4 loads a thread has in flight
static_assert(kTile * kDim / 4 % (kBatch * kThreads) == 0 &&
              kHeads * kDim / 4 % (kBatch * kThreads) == 0);

// Element (row, col) of a row-major bf16 array whose rows have `chunks` 16-byte chunks.
__device__ inline int swz(int row, int col, int chunks) {
  return row * chunks * 8 + (((col >> 3) ^ (row & 7)) << 3) + (col & 7);
}

// Four floats from a key or query row, which in entry pages may be only 4-byte aligned.
__device__ inline float4 load4(const float* p, bool aligned) {
  return aligned ? *reinterpret_cast<const float4*>(p) : make_float4(p[0], p[1], p[2], p[3]);
}

__device__ inline void store4(__nv_bfloat16* s, int row, int col, float4 v) {
  uint2 w;
  w.x = pack_bf16x2(v.x, v.y);
  w.y = pack_bf16x2(v.z, v.w);
  *reinterpret_cast<uint2*>(s + swz(row, col, kDimChunks)) = w;
}

__global__ void __launch_bounds__(kThreads, 1) sink_attention_mma_kernel(SinkAttentionArgs a) {
  pdl_grid_begin();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);          // [64 heads][512]
  __nv_bfloat16* ks = qs + kHeads * kDim;                                  // [64 keys][512]
  __nv_bfloat16* ps = ks + kTile * kDim;                                   // [64 heads][64 keys]
  float* red = reinterpret_cast<float*>(ps + kHeads * kTile);              // [2][2][64]: max, sum
  const float** keys = reinterpret_cast<const float**>(red + 4 * kHeads);  // [window + max_sel]

  const int64_t t = blockIdx.x;
  const QueryKeys qk = gather_query_keys(a, t, keys);
  if (qk.padding) {
    for (int i = threadIdx.x; i < kHeads * kDim; i += kThreads) a.out[t * kHeads * kDim + i] = 0;
    return;
  }
  const int nkeys = qk.nkeys;
  const float* q = a.q + t * kHeads * kDim;
  // Q and each key tile are 32 float4 a thread, all kBatch loads of a batch issued before any
  // store: in a load-then-store loop the compiler keeps each load behind the last store (the key
  // pointers sit in shared memory too), so about one load a thread was in flight.
  for (int i0 = threadIdx.x; i0 < kHeads * kDim / 4; i0 += kBatch * kThreads) {
    float4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = i0 + u * kThreads, row = i / (kDim / 4), col = (i % (kDim / 4)) * 4;
      v[u] = *reinterpret_cast<const float4*>(q + row * kDim + col);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = i0 + u * kThreads;
      store4(qs, i / (kDim / 4), (i % (kDim / 4)) * 4, v[u]);
    }
  }

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int hg = warp & 3, half = warp >> 2;  // head group; key half (scores), dim half (output)
  const int g = lane >> 2, tq = lane & 3;
  const int mi = lane >> 3, mr = lane & 7;  // ldmatrix: this lane's matrix and row in it
  const int row_lo = hg * 16 + g, row_hi = row_lo + 8;
  float o[32][4];
#pragma unroll
  for (int n = 0; n < 32; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m_lo = -FLT_MAX, m_hi = -FLT_MAX, l_lo = 0.0f, l_hi = 0.0f;

  for (int k0 = 0; k0 < nkeys; k0 += kTile) {
    __syncthreads();  // keys[] and Q written; the previous tile's K and P read
    const int nk = nkeys - k0 < kTile ? nkeys - k0 : kTile;
    for (int i0 = threadIdx.x; i0 < kTile * kDim / 4; i0 += kBatch * kThreads) {
      float4 v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + u * kThreads, row = i / (kDim / 4), col = (i % (kDim / 4)) * 4;
        v[u] = make_float4(0.f, 0.f, 0.f, 0.f);  // rows past the keys: zeros, never NaN
        if (row < nk) {
          const float* kr = keys[k0 + row];
          v[u] = load4(kr + col, (reinterpret_cast<uintptr_t>(kr) & 15) == 0);
        }
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + u * kThreads;
        store4(ks, i / (kDim / 4), (i % (kDim / 4)) * 4, v[u]);
      }
    }
    __syncthreads();

    // Scores of this warp's 16 heads x 32 keys, over all 512 dims.
    float sc[4][4];
#pragma unroll
    for (int n = 0; n < 4; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll 4
    for (int kk = 0; kk < kDim / 16; ++kk) {
      uint32_t af[4];
      ldmatrix_x4(af, qs + swz(hg * 16 + (mi & 1) * 8 + mr, kk * 16 + (mi >> 1) * 8, kDimChunks));
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        uint32_t bf[4];
        ldmatrix_x4(bf, ks + swz(half * 32 + np * 16 + (mi >> 1) * 8 + mr, kk * 16 + (mi & 1) * 8,
                                 kDimChunks));
        mma_bf16_16816(sc[2 * np], af, bf[0], bf[1]);
        mma_bf16_16816(sc[2 * np + 1], af, bf[2], bf[3]);
      }
    }
    // Scale, mask the keys past nk, and this warp's row maxima.
    float mx_lo = -FLT_MAX, mx_hi = -FLT_MAX;
#pragma unroll
    for (int n = 0; n < 4; ++n) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const bool valid = half * 32 + n * 8 + 2 * tq + j < nk;
        sc[n][j] = valid ? sc[n][j] * a.scale : -FLT_MAX;
        sc[n][2 + j] = valid ? sc[n][2 + j] * a.scale : -FLT_MAX;
        mx_lo = fmaxf(mx_lo, sc[n][j]);
        mx_hi = fmaxf(mx_hi, sc[n][2 + j]);
      }
    }
#pragma unroll
    for (int o2 = 1; o2 <= 2; o2 <<= 1) {
      mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, o2));
      mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, o2));
    }
    if (tq == 0) {
      red[half * kHeads + row_lo] = mx_lo;
      red[half * kHeads + row_hi] = mx_hi;
    }
    __syncthreads();
    const float new_lo = fmaxf(m_lo, fmaxf(red[row_lo], red[kHeads + row_lo]));
    const float new_hi = fmaxf(m_hi, fmaxf(red[row_hi], red[kHeads + row_hi]));
    // Probabilities against the new maxima, to shared memory as bf16, and their row sums.
    float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const float p0 = __expf(sc[n][0] - new_lo), p1 = __expf(sc[n][1] - new_lo);
      const float p2 = __expf(sc[n][2] - new_hi), p3 = __expf(sc[n][3] - new_hi);
      sum_lo += p0 + p1;
      sum_hi += p2 + p3;
      const int col = half * 32 + n * 8 + 2 * tq;
      *reinterpret_cast<uint32_t*>(ps + swz(row_lo, col, kTileChunks)) = pack_bf16x2(p0, p1);
      *reinterpret_cast<uint32_t*>(ps + swz(row_hi, col, kTileChunks)) = pack_bf16x2(p2, p3);
    }
#pragma unroll
    for (int o2 = 1; o2 <= 2; o2 <<= 1) {
      sum_lo += __shfl_xor_sync(0xffffffffu, sum_lo, o2);
      sum_hi += __shfl_xor_sync(0xffffffffu, sum_hi, o2);
    }
    if (tq == 0) {
      red[2 * kHeads + half * kHeads + row_lo] = sum_lo;
      red[2 * kHeads + half * kHeads + row_hi] = sum_hi;
    }
    __syncthreads();
    const float alpha_lo = __expf(m_lo - new_lo), alpha_hi = __expf(m_hi - new_hi);
    l_lo = l_lo * alpha_lo + red[2 * kHeads + row_lo] + red[3 * kHeads + row_lo];
    l_hi = l_hi * alpha_hi + red[2 * kHeads + row_hi] + red[3 * kHeads + row_hi];
    m_lo = new_lo;
    m_hi = new_hi;
#pragma unroll
    for (int n = 0; n < 32; ++n) {
      o[n][0] *= alpha_lo;
      o[n][1] *= alpha_lo;
      o[n][2] *= alpha_hi;
      o[n][3] *= alpha_hi;
    }

    // Output: this warp's 16 heads x 256 dims += P (16 x 64 keys) K (64 keys x 256 dims).
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      uint32_t af[4];
      ldmatrix_x4(af, ps + swz(hg * 16 + (mi & 1) * 8 + mr, kk * 16 + (mi >> 1) * 8, kTileChunks));
#pragma unroll
      for (int np = 0; np < 16; ++np) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, ks + swz(kk * 16 + (mi & 1) * 8 + mr,
                                       half * 256 + np * 16 + (mi >> 1) * 8, kDimChunks));
        mma_bf16_16816(o[2 * np], af, bf[0], bf[1]);
        mma_bf16_16816(o[2 * np + 1], af, bf[2], bf[3]);
      }
    }
  }

  // The sink joins each head's denominator.
  const float den_lo = l_lo + __expf(a.sinks[row_lo] - m_lo);
  const float den_hi = l_hi + __expf(a.sinks[row_hi] - m_hi);
  const float inv_lo = 1.0f / den_lo, inv_hi = 1.0f / den_hi;
  float* out = a.out + t * kHeads * kDim;
#pragma unroll
  for (int n = 0; n < 32; ++n) {
    const int col = half * 256 + n * 8 + 2 * tq;
    *reinterpret_cast<float2*>(out + row_lo * kDim + col) =
        make_float2(o[n][0] * inv_lo, o[n][1] * inv_lo);
    *reinterpret_cast<float2*>(out + row_hi * kDim + col) =
        make_float2(o[n][2] * inv_hi, o[n][3] * inv_hi);
  }
}

size_t smem_bytes(const SinkAttentionArgs& a) {
  const size_t bf16 = sizeof(__nv_bfloat16);
  return bf16 * (2 * kHeads * kDim + kHeads * kTile) + sizeof(float) * 4 * kHeads +
         sizeof(const float*) * (a.window + a.max_selected);
}

}  // namespace

bool sink_attention_mma_fits(const SinkAttentionArgs& a) {
  return a.num_heads == kHeads && a.head_dim == kDim && a.num_queries > 0;
}

void sink_attention_mma(const SinkAttentionArgs& a, cudaStream_t stream) {
  const size_t smem = smem_bytes(a);
  static SmemLimit limit(reinterpret_cast<const void*>(sink_attention_mma_kernel));
  limit.ensure(smem);
  launch_kernel(sink_attention_mma_kernel, static_cast<unsigned>(a.num_queries), kThreads, smem,
                stream, a);
}

}  // namespace deepinfer::cuda

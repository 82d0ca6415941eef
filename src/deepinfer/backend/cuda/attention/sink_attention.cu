#include <cfloat>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "deepinfer/backend/cuda/attention/sink_attention.h"
#include "deepinfer/backend/cuda/attention/sink_attention_mma.h"
#include "deepinfer/backend/cuda/attention/sink_attention_split.h"
#include "deepinfer/backend/cuda/attention/sink_keys.cuh"
#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/reduce.cuh"
#include "deepinfer/backend/cuda/smem_limit.h"

namespace deepinfer::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// One block per (query, group of HG heads). Every head shares the key rows (one K=V row per key),
// so a block reads each of its keys once for HG heads: warps score keys (lanes split the dims,
// each holding all HG dot products, then one reduce-scatter), the block takes each head's
// softmax with its sink, and threads accumulate their output dims over the keys for every head.
// Keys are read with 16-byte loads where aligned (entry slots in pages need not be).
template <int HG>
__global__ void __launch_bounds__(kThreads) sink_attention_kernel(SinkAttentionArgs a) {
  pdl_grid_begin();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int cap = (a.window + a.max_selected + 1) & ~1;  // keeps what follows 16-byte aligned
  const float** keys = reinterpret_cast<const float**>(smem_raw);  // cap
  float* qs = reinterpret_cast<float*>(keys + cap);                // [HG][head_dim]
  float* probs = qs + HG * a.head_dim;                             // [key][HG]
  __shared__ float head_inv[HG];
  const int64_t t = blockIdx.x;
  const int h0 = blockIdx.y * HG;
  const int hd = a.head_dim, nh = a.num_heads;
  const QueryKeys qk = gather_query_keys(a, t, keys);
  if (qk.padding) {
    for (int i = threadIdx.x; i < HG * hd; i += blockDim.x)
      if (h0 + i / hd < nh) a.out[(t * nh + h0) * hd + i] = 0.0f;
    return;
  }
  const int nkeys = qk.nkeys;
  if constexpr (SINK_Q_BATCH != 0)
    stage_query<kThreads>(a, t, h0, HG, qs);
  else  // stage_query's loop at blockDim.x: this kernel's machine code as it was measured
    for (int i = threadIdx.x; i < HG * hd; i += blockDim.x)
      qs[i] = h0 + i / hd < nh ? a.q[(t * nh + h0) * hd + i] : 0.0f;
  __syncthreads();

  // Logits, as probs[k][h] (scaled). A warp scores two keys at a time (k and k + kWarps), their
  // loads in flight together; each key's sum is the one it had alone.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int k = warp; k < nkeys; k += 2 * kWarps) {
    const int kk[2] = {k, k + kWarps < nkeys ? k + kWarps : -1};
    float acc[2][HG];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int h = 0; h < HG; ++h) acc[i][h] = 0.0f;
    const float* kr[2] = {keys[k], keys[kk[1] >= 0 ? kk[1] : k]};
    const bool vec[2] = {(reinterpret_cast<uintptr_t>(kr[0]) & 15) == 0,
                         (reinterpret_cast<uintptr_t>(kr[1]) & 15) == 0};
    for (int d = lane * 4; d < hd; d += 128) {
      float4 kv[2];
#pragma unroll
      for (int i = 0; i < 2; ++i)
        kv[i] = vec[i] ? *reinterpret_cast<const float4*>(kr[i] + d)
                       : make_float4(kr[i][d], kr[i][d + 1], kr[i][d + 2], kr[i][d + 3]);
#pragma unroll
      for (int h = 0; h < HG; ++h) {
        const float4 qv = *reinterpret_cast<const float4*>(qs + h * hd + d);
#pragma unroll
        for (int i = 0; i < 2; ++i)
          acc[i][h] += qv.x * kv[i].x + qv.y * kv[i].y + qv.z * kv[i].z + qv.w * kv[i].w;
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if (kk[i] < 0) break;  // warp-uniform
      const float dot = reduce_scatter<HG>(acc[i], lane);
      if ((lane & (32 / HG - 1)) == 0) probs[kk[i] * HG + lane / (32 / HG)] = dot * a.scale;
    }
  }
  __syncthreads();

  // Softmax per head with its sink, a warp per head: the sums' order depends on the key count
  // only, not on HG, so a query's output is the same bits whichever group width its launch took.
  for (int h = warp; h < HG; h += kWarps) {
    const float sink = h0 + h < nh ? a.sinks[h0 + h] : 0.0f;
    float mx = sink;
    for (int k = lane; k < nkeys; k += 32) mx = fmaxf(mx, probs[k * HG + h]);
    mx = warp_max(mx);
    float den = 0.0f;
    for (int k = lane; k < nkeys; k += 32)
      den += (probs[k * HG + h] = expf(probs[k * HG + h] - mx));
    den = warp_sum(den) + expf(sink - mx);
    if (lane == 0) head_inv[h] = 1.0f / den;
  }
  __syncthreads();

  // Output: two dims per thread, every head of the group, keys in order. A thread loads the
  // values of kAhead keys before it multiplies any (at decode's few queries each block walks
  // hundreds of keys, and one load in flight a thread left it bound by the L2's latency); the
  // sums keep the key order, so the bits do not change.
  constexpr int kAhead = 8;
  const auto value2 = [&](int k, int d) {
    const float* kr = keys[k];
    return (reinterpret_cast<uintptr_t>(kr) & 7) == 0 ? *reinterpret_cast<const float2*>(kr + d)
                                                      : make_float2(kr[d], kr[d + 1]);
  };
  for (int d = threadIdx.x * 2; d < hd; d += 2 * kThreads) {
    float acc[HG][2];
#pragma unroll
    for (int h = 0; h < HG; ++h) acc[h][0] = acc[h][1] = 0.0f;
    const auto add = [&](int k, float2 kv) {
      float pk[HG];
      if constexpr (HG % 4 == 0) {
#pragma unroll
        for (int h = 0; h < HG; h += 4) {
          const float4 v = *reinterpret_cast<const float4*>(probs + k * HG + h);
          pk[h] = v.x;
          pk[h + 1] = v.y;
          pk[h + 2] = v.z;
          pk[h + 3] = v.w;
        }
      } else {
#pragma unroll
        for (int h = 0; h < HG; ++h) pk[h] = probs[k * HG + h];
      }
#pragma unroll
      for (int h = 0; h < HG; ++h) {
        acc[h][0] += pk[h] * kv.x;
        acc[h][1] += pk[h] * kv.y;
      }
    };
    int k = 0;
    for (; k + kAhead <= nkeys; k += kAhead) {
      float2 kv[kAhead];
#pragma unroll
      for (int u = 0; u < kAhead; ++u) kv[u] = value2(k + u, d);
#pragma unroll
      for (int u = 0; u < kAhead; ++u) add(k + u, kv[u]);
    }
    for (; k < nkeys; ++k) add(k, value2(k, d));
#pragma unroll
    for (int h = 0; h < HG; ++h) {
      if (h0 + h >= nh) continue;
      float* o = a.out + (t * nh + h0 + h) * hd + d;
      o[0] = acc[h][0] * head_inv[h];
      o[1] = acc[h][1] * head_inv[h];
    }
  }
}

template <int HG>
void launch(const SinkAttentionArgs& a, cudaStream_t stream) {
  const int cap = (a.window + a.max_selected + 1) & ~1;
  const size_t smem =
      sizeof(const float*) * cap + sizeof(float) * HG * a.head_dim + sizeof(float) * cap * HG;
  static SmemLimit limit(reinterpret_cast<const void*>(sink_attention_kernel<HG>));
  limit.ensure(smem);
  dim3 grid(static_cast<unsigned>(a.num_queries),
            static_cast<unsigned>((a.num_heads + HG - 1) / HG));
  launch_kernel(sink_attention_kernel<HG>, grid, kThreads, smem, stream, a);
}

}  // namespace

void sink_attention(const SinkAttentionArgs& a, cudaStream_t stream) {
  if (a.num_queries == 0) return;
  const bool mma_fits = sink_attention_mma_fits(a);
  if (a.kernel == SinkKernel::kTensorCores && !mma_fits) {
    std::fprintf(stderr,
                 "sink_attention: the tensor-core kernel needs 64 heads of 512 dims, got %d of "
                 "%d\n",
                 a.num_heads, a.head_dim);
    std::abort();
  }
  if (a.kernel == SinkKernel::kTensorCores ||
      (a.kernel == SinkKernel::kAuto && mma_fits && a.num_queries >= kSinkMmaMinQueries)) {
    sink_attention_mma(a, stream);
    return;
  }
  if (a.head_dim % 4 != 0) {
    std::fprintf(stderr, "sink_attention: head_dim %d is not a multiple of 4\n", a.head_dim);
    std::abort();
  }
  if (a.kernel == SinkKernel::kSplit ||
      (a.kernel == SinkKernel::kAuto && a.num_queries <= kSinkSplitMaxQueries &&
       sink_split_fits(a))) {
    sink_attention_split(a, stream);
    return;
  }
  // Heads per block: wider groups read each key for more heads, but a few queries (small decode
  // batches) need narrower ones to fill the GPU. The widest group (V4's 64 heads: 16) that still
  // gives kMinBlocks blocks, else one head per block.
  constexpr int64_t kMinBlocks = 256;
  const auto blocks = [&](int hg) { return a.num_queries * ((a.num_heads + hg - 1) / hg); };
  if (a.num_heads >= 16 && blocks(16) >= kMinBlocks)
    launch<16>(a, stream);
  else if (a.num_heads >= 8 && blocks(8) >= kMinBlocks)
    launch<8>(a, stream);
  else if (a.num_heads >= 4 && blocks(4) >= kMinBlocks)
    launch<4>(a, stream);
  else if (a.num_heads >= 2 && blocks(2) >= kMinBlocks)
    launch<2>(a, stream);
  else
    launch<1>(a, stream);
}

}  // namespace deepinfer::cuda

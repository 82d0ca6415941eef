#include <cfloat>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

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
constexpr int kHG = 8;  // heads a block: a warp each in the softmax
constexpr int kChunk = kSinkSplitChunk;
constexpr int kPad = 4;  // a partial is [max, sum, -, -, values...]: the values 16-byte aligned
static_assert(kHG == kWarps, "the chunk's softmax takes a warp a head");

__host__ __device__ inline int64_t partial_floats(int head_dim) { return head_dim + kPad; }
int chunks_of(const SinkAttentionArgs& a) {
  return (a.window + a.max_selected + kChunk - 1) / kChunk;  // bounds every query's keys
}
int64_t partials_needed(const SinkAttentionArgs& a) {
  return a.num_queries * chunks_of(a) * a.num_heads * partial_floats(a.head_dim);
}

// Block (query t, chunk c, heads h0..h0+7): for keys c*kChunk.. of t's keys (gather_query_keys's
// order) the logits, the chunk's max m and sum l of exp(logit - m) per head, and the values
// weighted by those numerators, into part[t][c][h].
__global__ void __launch_bounds__(kThreads) split_partial_kernel(SinkAttentionArgs a, float* part) {
  pdl_grid_begin();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int cap = (a.window + a.max_selected + 1) & ~1;  // keeps what follows 16-byte aligned
  const float** keys = reinterpret_cast<const float**>(smem_raw);  // cap
  float* qs = reinterpret_cast<float*>(keys + cap);                // [kHG][head_dim]
  float* probs = qs + kHG * a.head_dim;                            // [kChunk][kHG]
  const int64_t t = blockIdx.x;
  const int c = blockIdx.y, h0 = blockIdx.z * kHG, hd = a.head_dim, nh = a.num_heads;
  const QueryKeys qk = gather_query_keys(a, t, keys);
  const int k0 = c * kChunk;
  if (qk.padding || k0 >= qk.nkeys) return;  // the merge reads only the chunks that have keys
  const int n = qk.nkeys - k0 < kChunk ? qk.nkeys - k0 : kChunk;
  stage_query<kThreads>(a, t, h0, kHG, qs);
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float* const mine = part + (t * gridDim.y + c) * nh * partial_floats(hd);

  // Logits: a warp a key, lanes over the dims, one reduce-scatter over the group's heads. A lane
  // takes a key's dims lane * 4 + 128 i, kLoads float4s a round; up to head_dim 512 that is the
  // whole key, and a warp loads all its keys (kKeysAWarp) before summing any: one round trip
  // where a key at a time took four (decode's CSA layers, 160 blocks of one wave).
  constexpr int kKeysAWarp = kChunk / kWarps, kLoads = 4;
  const auto load = [&](int k, int i0, float4(&kv)[kLoads]) {
    const float* kr = keys[k0 + k];
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int d = lane * 4 + 128 * (i0 + i);
      kv[i] = d >= hd ? make_float4(0.f, 0.f, 0.f, 0.f)
              : (reinterpret_cast<uintptr_t>(kr) & 15) == 0
                  ? *reinterpret_cast<const float4*>(kr + d)
                  : make_float4(kr[d], kr[d + 1], kr[d + 2], kr[d + 3]);
    }
  };
  const auto add = [&](const float4(&kv)[kLoads], int i0, float(&acc)[kHG]) {  // d in order
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int d = lane * 4 + 128 * (i0 + i);
      if (d >= hd) break;
#pragma unroll
      for (int h = 0; h < kHG; ++h) {
        const float4 qv = *reinterpret_cast<const float4*>(qs + h * hd + d);
        acc[h] += qv.x * kv[i].x + qv.y * kv[i].y + qv.z * kv[i].z + qv.w * kv[i].w;
      }
    }
  };
  const auto finish = [&](int k, float(&acc)[kHG]) {
    const float dot = reduce_scatter<kHG>(acc, lane);
    if ((lane & (32 / kHG - 1)) == 0) probs[k * kHG + lane / (32 / kHG)] = dot * a.scale;
  };
  if (hd <= 128 * kLoads) {
    float4 kv[kKeysAWarp][kLoads];
#pragma unroll
    for (int j = 0; j < kKeysAWarp; ++j)
      if (warp + j * kWarps < n) load(warp + j * kWarps, 0, kv[j]);
#pragma unroll
    for (int j = 0; j < kKeysAWarp; ++j) {
      if (warp + j * kWarps >= n) break;
      float acc[kHG] = {};
      add(kv[j], 0, acc);
      finish(warp + j * kWarps, acc);
    }
  } else {
    for (int k = warp; k < n; k += kWarps) {
      float acc[kHG] = {};
      for (int i0 = 0; 128 * i0 < hd; i0 += kLoads) {
        float4 kv[kLoads];
        load(k, i0, kv);
        add(kv, i0, acc);
      }
      finish(k, acc);
    }
  }
  __syncthreads();

  // The chunk's softmax numerators, warp h for head h: max, then exp(logit - max) and their sum.
  {
    const int h = warp;
    float mx = -FLT_MAX;
    for (int k = lane; k < n; k += 32) mx = fmaxf(mx, probs[k * kHG + h]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int k = lane; k < n; k += 32) sum += (probs[k * kHG + h] = expf(probs[k * kHG + h] - mx));
    sum = warp_sum(sum);
    if (lane == 0 && h0 + h < nh) {
      mine[(h0 + h) * partial_floats(hd)] = mx;
      mine[(h0 + h) * partial_floats(hd) + 1] = sum;
    }
  }
  __syncthreads();

  // Values: two dims a thread, every head of the group, the chunk's keys in order.
  for (int d = threadIdx.x * 2; d < hd; d += 2 * kThreads) {
    float acc[kHG][2];
#pragma unroll
    for (int h = 0; h < kHG; ++h) acc[h][0] = acc[h][1] = 0.0f;
#pragma unroll 8
    for (int k = 0; k < n; ++k) {
      const float* kr = keys[k0 + k];
      const float2 kv = (reinterpret_cast<uintptr_t>(kr) & 7) == 0
                            ? *reinterpret_cast<const float2*>(kr + d)
                            : make_float2(kr[d], kr[d + 1]);
#pragma unroll
      for (int h = 0; h < kHG; ++h) {
        acc[h][0] += probs[k * kHG + h] * kv.x;
        acc[h][1] += probs[k * kHG + h] * kv.y;
      }
    }
#pragma unroll
    for (int h = 0; h < kHG; ++h) {
      if (h0 + h >= nh) continue;
      float* o = mine + (h0 + h) * partial_floats(hd) + kPad + d;
      o[0] = acc[h][0];
      o[1] = acc[h][1];
    }
  }
}

// Block (query t, head h): the chunks' partials merged in chunk order with the sink, which joins
// the denominator only: out = sum_c e^(m_c - m) o_c / (e^(sink - m) + sum_c e^(m_c - m) l_c).
// The chunks' m_c and l_c are staged in shared memory (dynamic: 3 floats a chunk) and each
// e^(m_c - m) formed once, by its own thread; the sums still walk the chunks in order, so the
// bits are the ones a thread forming every factor itself gets. A chunk at a time, with the
// factor formed again for every value, took about 8 us a head group at B=1 (ncu, H100).
__global__ void split_merge_kernel(SinkAttentionArgs a, const float* part, int chunks) {
  pdl_grid_begin();
  extern __shared__ float merge_sm[];
  float* ms = merge_sm;          // [chunks] m_c
  float* ls = ms + chunks;       // [chunks] l_c
  float* fs = ls + chunks;       // [chunks] e^(m_c - m)
  __shared__ float scratch[32];  // block_max's
  const int64_t t = blockIdx.x;
  const int h = blockIdx.y, hd = a.head_dim, nh = a.num_heads;
  float* out = a.out + (t * nh + h) * hd;
  const QueryKeys qk = count_query_keys(a, t);
  if (qk.padding) {
    for (int d = threadIdx.x; d < hd; d += blockDim.x) out[d] = 0.0f;
    return;
  }
  const int used = (qk.nkeys + kChunk - 1) / kChunk;
  const int64_t stride = int64_t{nh} * partial_floats(hd);  // from one chunk to the next
  const float* p = part + (t * chunks * nh + h) * partial_floats(hd);
  const float sink = a.sinks[h];
  float mx = sink;  // fmaxf is exact: any order gives the same maximum
  for (int c = threadIdx.x; c < used; c += blockDim.x) {
    ms[c] = p[c * stride];
    ls[c] = p[c * stride + 1];
    mx = fmaxf(mx, ms[c]);
  }
  mx = block_max(mx, scratch);
  for (int c = threadIdx.x; c < used; c += blockDim.x) fs[c] = expf(ms[c] - mx);
  __syncthreads();
  float den = expf(sink - mx);
  for (int c = 0; c < used; ++c) den += ls[c] * fs[c];
  const float inv = 1.0f / den;
  constexpr int kBatch = 8;  // a value's chunks loaded 8 at a time before any is added
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0.0f;
    for (int c0 = 0; c0 < used; c0 += kBatch) {
      float v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        v[u] = c0 + u < used ? p[(c0 + u) * stride + kPad + d] : 0.0f;
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        if (c0 + u < used) acc += v[u] * fs[c0 + u];
    }
    out[d] = acc * inv;
  }
}

}  // namespace

bool sink_split_fits(const SinkAttentionArgs& a) {
  // The merge stages 3 floats a chunk in shared memory, within the 48 KB a launch gets unasked.
  constexpr int kMaxMergeChunks = 48 * 1024 / (3 * sizeof(float));
  return a.head_dim % 4 == 0 && a.num_heads > 0 && chunks_of(a) > 0 &&
         chunks_of(a) <= kMaxMergeChunks && a.split_partials != nullptr &&
         partials_needed(a) <= a.split_partials_floats;
}

void sink_attention_split(const SinkAttentionArgs& a, cudaStream_t stream) {
  if (a.num_queries == 0) return;
  if (!sink_split_fits(a)) {
    std::fprintf(stderr,
                 "sink_attention: the split kernel needs %lld floats of partials, "
                 "SinkAttentionArgs::split_partials holds %lld\n",
                 static_cast<long long>(partials_needed(a)),
                 static_cast<long long>(a.split_partials ? a.split_partials_floats : 0));
    std::abort();
  }
  const int chunks = chunks_of(a), cap = (a.window + a.max_selected + 1) & ~1;
  const size_t smem = sizeof(const float*) * cap + sizeof(float) * kHG * (a.head_dim + kChunk);
  static SmemLimit limit(reinterpret_cast<const void*>(split_partial_kernel));
  limit.ensure(smem);
  const dim3 grid(static_cast<unsigned>(a.num_queries), static_cast<unsigned>(chunks),
                  static_cast<unsigned>((a.num_heads + kHG - 1) / kHG));
  launch_kernel(split_partial_kernel, grid, kThreads, smem, stream, a, a.split_partials);
  launch_kernel(split_merge_kernel, dim3(static_cast<unsigned>(a.num_queries), a.num_heads), 128,
                sizeof(float) * 3 * chunks, stream, a, a.split_partials, chunks);
}

int64_t sink_split_floats(int64_t queries, int num_heads, int head_dim, int max_keys) {
  return queries * ((max_keys + kChunk - 1) / kChunk) * num_heads * partial_floats(head_dim);
}

}  // namespace deepinfer::cuda

#include "deepinfer/backend/cuda/attention/sink_attention.h"
#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/reduce.cuh"
#include "deepinfer/backend/cuda/smem_limit.h"

namespace deepinfer::cuda {
namespace {

constexpr int kThreads = 256;

// One block per (query, head): warps score keys (lanes split the dims), then the block takes the
// softmax with the sink and threads accumulate output dims over keys in order.
__global__ void sink_attention_kernel(SinkAttentionArgs a) {
  // Every key's address is resolved once (entries through the block table) and kept here: the
  // output loop reads each key once per channel.
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const float** keys = reinterpret_cast<const float**>(smem_raw);          // window + max_selected
  float* qs = reinterpret_cast<float*>(keys + a.window + a.max_selected);  // head_dim
  float* logits = qs + a.head_dim;                                         // window + max_selected
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  const int h = blockIdx.y;
  const int hd = a.head_dim;
  float* o = a.out + (t * a.num_heads + h) * hd;
  const float* ring = a.ring;
  int64_t s = a.pos0 + t, seq = 0, start = a.pos0;
  if (a.query_seq) {
    seq = a.query_seq[t];
    if (seq < 0) {
      for (int d = threadIdx.x; d < hd; d += blockDim.x) o[d] = 0.0f;
      return;
    }
    ring = a.rings[seq];
    s = start = a.positions[t];
  }
  if (!a.fresh) start = s + 1;  // every window position is in the ring
  const int64_t first = s - (a.window - 1) > 0 ? s - (a.window - 1) : 0;
  const int nwin = static_cast<int>(s - first + 1);
  const int nsel = a.max_selected ? a.num_selected[t] : 0;
  const int nkeys = nwin + nsel;
  const float* q = a.q + (t * a.num_heads + h) * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = q[d];
  __syncthreads();

  for (int k = threadIdx.x; k < nkeys; k += blockDim.x) {
    if (k < nwin) {
      const int64_t p = first + k;
      keys[k] = p >= start ? a.fresh + (t - (s - p)) * hd : ring + (p % a.ring_rows) * hd;
    } else {
      keys[k] = a.entries.entry(seq, a.selected[t * a.max_selected + (k - nwin)]);
    }
  }
  __syncthreads();
  auto key = [&](int k) -> const float* { return keys[k]; };
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int k = warp; k < nkeys; k += warps) {
    const float* kr = key(k);
    float acc = 0;
    for (int d = lane; d < hd; d += 32) acc += qs[d] * kr[d];
    acc = warp_sum(acc);
    if (lane == 0) logits[k] = acc * a.scale;
  }
  __syncthreads();
  float mx = a.sinks[h];
  for (int k = threadIdx.x; k < nkeys; k += blockDim.x) mx = fmaxf(mx, logits[k]);
  mx = block_max(mx, scratch);
  float den = 0;
  for (int k = threadIdx.x; k < nkeys; k += blockDim.x) den += (logits[k] = expf(logits[k] - mx));
  den = block_sum(den, scratch) + expf(a.sinks[h] - mx);
  const float inv = 1.0f / den;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0;
    for (int k = 0; k < nkeys; ++k) acc += logits[k] * key(k)[d];
    o[d] = acc * inv;
  }
}

}  // namespace

void sink_attention(const SinkAttentionArgs& a, cudaStream_t stream) {
  if (a.num_queries == 0) return;
  const size_t smem = sizeof(const float*) * (a.window + a.max_selected) +
                      sizeof(float) * (a.head_dim + a.window + a.max_selected);
  static SmemLimit limit(reinterpret_cast<const void*>(sink_attention_kernel));
  limit.ensure(smem);
  dim3 grid(static_cast<unsigned>(a.num_queries), static_cast<unsigned>(a.num_heads));
  sink_attention_kernel<<<grid, kThreads, smem, stream>>>(a);
  DI_CUDA_LAUNCH_CHECK();
}

}  // namespace deepinfer::cuda

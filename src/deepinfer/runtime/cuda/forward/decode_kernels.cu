#include "deepinfer/backend/cuda/attention/rope_pair.cuh"
#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/reduce.cuh"
#include "deepinfer/runtime/cuda/forward/decode_kernels.h"

namespace deepinfer::cuda {
namespace {

// Same thread count as rms_norm's launch, so the entry's sum of squares adds up in the same
// order as in the prefill path.
constexpr int kThreads = 256;

__global__ void ring_write_kernel(const float* kv, DecodeRows r, int dim, LayerSlots s) {
  pdl_grid_begin();
  const int64_t b = blockIdx.x;
  const int seq = r.slot[b];
  if (seq < 0) return;
  float* row = s.ring[seq] + (r.pos[b] % s.ring_rows) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) row[i] = kv[b * dim + i];
}

// Floats of the unfinished window one block of a row rewrites in a step that completes no window.
// HCA's window is 128 slots of 512 channels, 512 KB of kv and gate rewritten by one SM when a
// block took the whole row: its launches took 25-27 us on an H100 (ncu, docs/gpu_next_b1/
// run6_h100). Such a step now spreads the window over ratio * width / this blocks, a number
// chosen by shape alone.
constexpr int kPendingPerBlock = 4096;

// Blocks (b, x): row b, slice x of its unfinished window. Slot k of the row's window is position
// e * ratio + k: the row's own token at k == j, earlier ones from the unfinished window (gate
// there already includes ape). A step that completes the window runs in block x == 0 alone (the
// pooling reads the pending slots that the reset then clears).
__global__ void compressor_kernel(DecodeCompressorArgs a, DecodeRows r) {
  pdl_grid_begin();
  extern __shared__ float entry[];  // dim
  __shared__ float scratch[32];
  const int64_t b = blockIdx.x;
  const int seq = r.slot[b];
  if (seq < 0) return;
  const int64_t p = r.pos[b];
  const int R = a.ratio, W = a.width, D = a.dim;
  const int j = static_cast<int>(p % R);
  const int64_t e = p / R;
  const bool overlap = W == 2 * D, completes = (p + 1) % R == 0;
  if (completes && blockIdx.y != 0) return;
  const float* kv = a.kv + b * W;
  const float* gate = a.gate + b * W;
  float* pkv = a.state.pending_kv[seq];
  float* pgate = a.state.pending_gate[seq];
  auto cur_kv = [&](int k, int ch) { return k == j ? kv[ch] : pkv[k * W + ch]; };
  auto cur_gate = [&](int k, int ch) {
    return k == j ? gate[ch] + a.ape[j * W + ch] : pgate[k * W + ch];
  };

  if (completes) {
    // Gated softmax pooling over the window's slots in slot order (compressor_pool's order):
    // CSA's previous-window A-halves first, then this window's B-halves.
    const float* prev_kv = overlap ? a.state.prev_kv[seq] : nullptr;
    const float* prev_gate = overlap ? a.state.prev_gate[seq] : nullptr;
    // A channel's slots load kBatch at a time before any is used (a load at a time put 2 x 8
    // dependent round trips on each of a thread's channels: 20 us a CSA layer at B=1 on an H100).
    constexpr int kBatch = 8;
    const int slots = overlap ? 2 * R : R;
    for (int ch = threadIdx.x; ch < D; ch += blockDim.x) {
      auto slot = [&](int k, float* v, float* g) {
        if (overlap && k < R) {
          *v = e == 0 ? 0.0f : prev_kv[k * D + ch];
          *g = e == 0 ? -INFINITY : prev_gate[k * D + ch];
        } else {
          const int kk = overlap ? k - R : k, cc = overlap ? D + ch : ch;
          *v = cur_kv(kk, cc), *g = cur_gate(kk, cc);
        }
      };
      float v[kBatch], g[kBatch], mx = -INFINITY;
      for (int k0 = 0; k0 < slots; k0 += kBatch) {
#pragma unroll
        for (int u = 0; u < kBatch; ++u)
          if (k0 + u < slots) slot(k0 + u, &v[u], &g[u]);
#pragma unroll
        for (int u = 0; u < kBatch; ++u)
          if (k0 + u < slots) mx = fmaxf(mx, g[u]);
      }
      float den = 0, num = 0;
      for (int k0 = 0; k0 < slots; k0 += kBatch) {
        if (slots > kBatch)  // else the batch above still holds every slot
#pragma unroll
          for (int u = 0; u < kBatch; ++u)
            if (k0 + u < slots) slot(k0 + u, &v[u], &g[u]);
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          if (k0 + u >= slots) break;
          const float w = expf(g[u] - mx);
          den = __fadd_rn(den, w);  // rounded as compressor_pool rounds (explicitly, both)
          num = __fmaf_rn(w, v[u], num);
        }
      }
      entry[ch] = num / den;
    }
    float ss = 0;
    for (int i = threadIdx.x; i < D; i += blockDim.x) ss = __fmaf_rn(entry[i], entry[i], ss);
    const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(D) + a.eps);
    for (int i = threadIdx.x; i < D; i += blockDim.x) entry[i] = entry[i] * inv * a.norm[i];
    __syncthreads();
    // Interleaved RoPE on the last rope_dim channels at the window's first position.
    float* tail = entry + D - a.rope_dim;
    for (int k = threadIdx.x; k < a.rope_dim / 2; k += blockDim.x) {
      const double ang = static_cast<double>(e * R) * a.inv_freq[k];
      rotate_pair(tail + 2 * k, static_cast<float>(cos(ang)), static_cast<float>(sin(ang)));
    }
    __syncthreads();
    float* dst = a.state.entries.entry(seq, e);
    for (int i = threadIdx.x; i < D; i += blockDim.x) dst[i] = entry[i];
    if (overlap) {
      // The finished window's A-halves are the next window's first slots. Pooling above read
      // prev_* and the pending rows; the barrier orders those reads before these writes.
      float* nkv = a.state.prev_kv[seq];
      float* ngate = a.state.prev_gate[seq];
      // kBatch elements' loads before their stores (the stores could alias them for all the
      // compiler knows, so a plain loop waits on each load in turn).
      for (int i0 = threadIdx.x; i0 < R * D; i0 += kBatch * blockDim.x) {
        float kv8[kBatch], g8[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int i = i0 + u * blockDim.x;
          if (i < R * D) kv8[u] = cur_kv(i / D, i % D), g8[u] = cur_gate(i / D, i % D);
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int i = i0 + u * blockDim.x;
          if (i < R * D) nkv[i] = kv8[u], ngate[i] = g8[u];
        }
      }
    }
    __syncthreads();  // the A-halves above read pending rows that the reset below clears
  }
  // The unfinished window: the token lands in slot j; a completed window starts over empty.
  const int begin = completes ? 0 : static_cast<int>(blockIdx.y) * kPendingPerBlock;
  const int end = completes ? R * W : min(R * W, begin + kPendingPerBlock);
  for (int i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const int k = i / W, ch = i % W;
    if (completes || k > j) {
      pkv[i] = 0.0f;
      pgate[i] = -INFINITY;
    } else if (k == j) {
      pkv[i] = kv[ch];
      pgate[i] = gate[ch] + a.ape[j * W + ch];
    }
  }
}

__global__ void select_all_kernel(DecodeRows r, int ratio, int max_selected, int32_t* selected,
                                  int32_t* num_selected) {
  pdl_grid_begin();
  const int64_t b = blockIdx.x;
  const int visible = r.slot[b] < 0 ? 0 : static_cast<int>((r.pos[b] + 1) / ratio);
  for (int j = threadIdx.x; j < max_selected; j += blockDim.x)
    selected[b * max_selected + j] = j < visible ? j : -1;
  if (threadIdx.x == 0) num_selected[b] = visible;
}

}  // namespace

void decode_ring_write(const float* kv, const DecodeRows& r, int dim, const LayerSlots& s,
                       cudaStream_t stream) {
  if (r.count == 0) return;
  launch_kernel(ring_write_kernel, static_cast<unsigned>(r.count), kThreads, 0, stream, kv, r, dim,
                s);
}

void decode_compressor(const DecodeCompressorArgs& a, const DecodeRows& r, cudaStream_t stream) {
  if (r.count == 0) return;
  const int slices = (a.ratio * a.width + kPendingPerBlock - 1) / kPendingPerBlock;
  launch_kernel(compressor_kernel, dim3(static_cast<unsigned>(r.count), slices), kThreads,
                sizeof(float) * a.dim, stream, a, r);
}

void decode_select_all(const DecodeRows& r, int ratio, int max_selected, int32_t* selected,
                       int32_t* num_selected, cudaStream_t stream) {
  if (r.count == 0) return;
  launch_kernel(select_all_kernel, static_cast<unsigned>(r.count), kThreads, 0, stream, r, ratio,
                max_selected, selected, num_selected);
}

}  // namespace deepinfer::cuda

// The keys query t of a sink_attention launch sees (sink_attention.h), as row pointers: its
// window (the segment's fresh positions, earlier ones from the ring) then its selected entries.
// Both kernels read them from here, so they visit the same keys in the same order. Also the
// staging of the query's rows into shared memory (stage_query).
#pragma once

#include <cstdint>

#include "deepinfer/backend/cuda/attention/sink_attention.h"

namespace deepinfer::cuda {

struct QueryKeys {
  bool padding = false;  // batched decode's padding row: no keys, a zero output
  int nkeys = 0;
};

// Query t's window: its position s, the first window position, and how many of its keys are
// window positions (nwin) and selected entries (nsel).
struct QueryWindow {
  bool padding = false;  // batched decode's padding row: no keys
  int64_t seq = 0, s = 0, first = 0;
  int nwin = 0, nsel = 0;
};

__device__ inline QueryWindow query_window(const SinkAttentionArgs& a, int64_t t) {
  QueryWindow w;
  w.s = a.pos0 + t;
  if (a.query_seq) {
    w.seq = a.query_seq[t];
    if (w.seq < 0) {
      w.padding = true;
      return w;
    }
    w.s = a.positions[t];
  }
  w.first = w.s - (a.window - 1) > 0 ? w.s - (a.window - 1) : 0;
  w.nwin = static_cast<int>(w.s - w.first + 1);
  w.nsel = a.max_selected ? a.num_selected[t] : 0;
  return w;
}

// How many keys query t sees (gather_query_keys's count, without the pointers).
__device__ inline QueryKeys count_query_keys(const SinkAttentionArgs& a, int64_t t) {
  const QueryWindow w = query_window(a, t);
  return {w.padding, w.padding ? 0 : w.nwin + w.nsel};
}

// The block's threads fill keys[0 .. nkeys) together; the caller syncs before reading them.
__device__ inline QueryKeys gather_query_keys(const SinkAttentionArgs& a, int64_t t,
                                              const float** keys) {
  const QueryWindow w = query_window(a, t);
  if (w.padding) return {true, 0};
  const int hd = a.head_dim;
  const float* ring = a.query_seq ? a.rings[w.seq] : a.ring;
  // Window positions from the segment's start (pos0; a decode row's own position) are fresh,
  // earlier ones in the ring; without fresh keys every position is in the ring.
  const int64_t start = !a.fresh ? w.s + 1 : a.query_seq ? w.s : a.pos0;
  const int nkeys = w.nwin + w.nsel;
  for (int k = threadIdx.x; k < nkeys; k += blockDim.x) {
    if (k < w.nwin) {
      const int64_t p = w.first + k;
      keys[k] = p >= start ? a.fresh + (t - (w.s - p)) * hd : ring + (p % a.ring_rows) * hd;
    } else {
      keys[k] = a.entries.entry(w.seq, a.selected[t * a.max_selected + (k - w.nwin)]);
    }
  }
  return {false, nkeys};
}

// Query t's rows of heads [h0, h0 + hg) into qs [hg][head_dim], zeros for heads past num_heads,
// by the whole block (the caller syncs before reading). With SINK_Q_BATCH where q's rows and qs
// are 16-byte aligned: float4 loads, kBatch of a thread's issued before any store. The scalar
// loop keeps each load behind a branch and the last shared store (the split kernel's PTX), so a
// decode block waits on the memory 16 to 32 times before its first key. The same values either
// way. Off by default until a GPU run has checked and timed it (a variant to build).
#ifndef SINK_Q_BATCH
#define SINK_Q_BATCH 0
#endif
template <int kThreads>  // the block's threads
__device__ inline void stage_query(const SinkAttentionArgs& a, int64_t t, int h0, int hg,
                                   float* qs) {
  constexpr int kBatch = 4, threads = kThreads;
  const int hd = a.head_dim, nh = a.num_heads;
  const float* q = a.q + (t * nh + h0) * hd;
  if (SINK_Q_BATCH && hd % 4 == 0 && (reinterpret_cast<uintptr_t>(q) & 15) == 0 &&
      (reinterpret_cast<uintptr_t>(qs) & 15) == 0) {
    const int n4 = hg * hd / 4;
    for (int i0 = threadIdx.x; i0 < n4; i0 += kBatch * threads) {
      float4 v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + u * threads;  // a float4 never straddles two heads (hd % 4 == 0)
        v[u] = i < n4 && h0 + 4 * i / hd < nh ? reinterpret_cast<const float4*>(q)[i]
                                              : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + u * threads;
        if (i < n4) reinterpret_cast<float4*>(qs)[i] = v[u];
      }
    }
    return;
  }
  for (int i = threadIdx.x; i < hg * hd; i += kThreads)
    qs[i] = h0 + i / hd < nh ? a.q[(t * nh + h0) * hd + i] : 0.0f;
}

}  // namespace deepinfer::cuda

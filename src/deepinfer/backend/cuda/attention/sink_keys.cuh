// The keys query t of a sink_attention launch sees (sink_attention.h), as row pointers: its
// window (the segment's fresh positions, earlier ones from the ring) then its selected entries.
// Both kernels read them from here, so they visit the same keys in the same order.
#pragma once

#include <cstdint>

#include "deepinfer/backend/cuda/attention/sink_attention.h"

namespace deepinfer::cuda {

struct QueryKeys {
  bool padding = false;  // batched decode's padding row: no keys, a zero output
  int nkeys = 0;
};

// How many keys query t sees (gather_query_keys's count, without the pointers).
__device__ inline QueryKeys count_query_keys(const SinkAttentionArgs& a, int64_t t) {
  int64_t s = a.pos0 + t;
  if (a.query_seq) {
    if (a.query_seq[t] < 0) return {true, 0};
    s = a.positions[t];
  }
  const int64_t first = s - (a.window - 1) > 0 ? s - (a.window - 1) : 0;
  return {false, static_cast<int>(s - first + 1) + (a.max_selected ? a.num_selected[t] : 0)};
}

// The block's threads fill keys[0 .. nkeys) together; the caller syncs before reading them.
__device__ inline QueryKeys gather_query_keys(const SinkAttentionArgs& a, int64_t t,
                                              const float** keys) {
  const int hd = a.head_dim;
  const float* ring = a.ring;
  int64_t s = a.pos0 + t, seq = 0, start = a.pos0;
  if (a.query_seq) {
    seq = a.query_seq[t];
    if (seq < 0) return {true, 0};
    ring = a.rings[seq];
    s = start = a.positions[t];
  }
  if (!a.fresh) start = s + 1;  // every window position is in the ring
  const int64_t first = s - (a.window - 1) > 0 ? s - (a.window - 1) : 0;
  const int nwin = static_cast<int>(s - first + 1);
  const int nsel = a.max_selected ? a.num_selected[t] : 0;
  const int nkeys = nwin + nsel;
  for (int k = threadIdx.x; k < nkeys; k += blockDim.x) {
    if (k < nwin) {
      const int64_t p = first + k;
      keys[k] = p >= start ? a.fresh + (t - (s - p)) * hd : ring + (p % a.ring_rows) * hd;
    } else {
      keys[k] = a.entries.entry(seq, a.selected[t * a.max_selected + (k - nwin)]);
    }
  }
  return {false, nkeys};
}

}  // namespace deepinfer::cuda

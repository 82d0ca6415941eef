// The per-sequence attention state of a batched decode step (one row per sequence), each kernel
// over all rows at once: a row finds its sequence's buffers through the step's tables (its
// constant buffers, its block table) and its position in device memory, so nothing here depends on
// host values that change per step and the launches can be replayed from a CUDA graph. Slot -1
// marks a padding row (a batch filled up to its graph's bucket): it reads and writes no state.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "deepinfer/runtime/cuda/forward/slot_views.h"

namespace deepinfer::cuda {

struct DecodeRows {
  const int32_t* slot = nullptr;  // device [count]: the row's row of the tables; -1: padding
  const int64_t* pos = nullptr;   // device [count]: the position the row's token takes
  int64_t count = 0;
};

// Row b's kv goes to its ring at row pos % ring_rows (after attention read the ring).
void decode_ring_write(const float* kv, const DecodeRows& r, int dim, const LayerSlots& s,
                       cudaStream_t stream);

// One token per row into its sequence's compressor (as compressor_update with n = 1): the token
// joins the unfinished window; a row whose token completes window e also pools it, normalizes
// and rotates it (at position e * ratio) into entry e, and for CSA keeps its A-halves.
struct DecodeCompressorArgs {
  const float* kv = nullptr;    // [count, width]
  const float* gate = nullptr;  // [count, width]
  const float* ape = nullptr;   // [ratio, width]
  const float* norm = nullptr;  // [dim]
  const double* inv_freq = nullptr;
  float eps = 0;
  int ratio = 0, width = 0, dim = 0, rope_dim = 0;
  CompressorSlots state;
};
void decode_compressor(const DecodeCompressorArgs& a, const DecodeRows& r, cudaStream_t stream);

// HCA: row b attends every visible entry 0 .. (pos + 1) / ratio - 1 (none for padding).
void decode_select_all(const DecodeRows& r, int ratio, int max_selected, int32_t* selected,
                       int32_t* num_selected, cudaStream_t stream);

}  // namespace deepinfer::cuda

// Plain views of where sequences' state lies in the device page pool (paged_state.h resolves
// them from the StateLayout and the sequences' pages), kept apart so kernels can take them
// without the model config.
#pragma once

#include <cstdint>

#include "deepinfer/backend/cuda/entry_pages.h"

namespace deepinfer::cuda {

// One sequence's compressor of one layer (a prefill segment): its constant buffers and its
// entries (row 0 of entries' tables is the sequence's block table).
struct CompressorView {
  int ratio = 0, width = 0, dim = 0;  // ratio 0: the layer has no such compressor
  float* pending_kv = nullptr;        // [ratio, width]
  float* pending_gate = nullptr;
  float* prev_kv = nullptr;  // [ratio, dim], CSA only
  float* prev_gate = nullptr;
  EntryPages entries;
};

struct LayerView {
  float* ring = nullptr;  // [ring_rows, head_dim]: position p at row p % ring_rows
  int64_t ring_rows = 0;
  CompressorView comp, index;  // where the layer has them
};

// Batched decode reaches each row's own sequence through device arrays indexed by the row's
// slot (its row of the step's tables), so a step's kernels (and a CUDA graph of them) depend on
// the rows' pages only through device data.
struct CompressorSlots {
  float* const* pending_kv = nullptr;  // [rows] each -> that row's CompressorView::pending_kv
  float* const* pending_gate = nullptr;
  float* const* prev_kv = nullptr;  // CSA only
  float* const* prev_gate = nullptr;
  EntryPages entries;  // tables: [rows, max token pages]
};

struct LayerSlots {
  float* const* ring = nullptr;  // [rows]
  int64_t ring_rows = 0;
  CompressorSlots comp, index;  // where the layer has them
};

}  // namespace deepinfer::cuda

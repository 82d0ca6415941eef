// Plain views of the per-slot state tables (device_state.h builds them), kept apart so kernels
// can take them without the model config.
#pragma once

#include <cstdint>

namespace deepinfer::cuda {

// Batched decode reaches each row's own sequence through device arrays indexed by slot, so a
// step's kernels (and a CUDA graph of them) depend on the rows' slots only through device data.
struct CompressorSlots {
  float* const* pending_kv = nullptr;  // [slots] each -> DeviceCompressor::pending_kv
  float* const* pending_gate = nullptr;
  float* const* prev_kv = nullptr;  // CSA only
  float* const* prev_gate = nullptr;
  float* const* entries = nullptr;
};

struct LayerSlots {
  float* const* ring = nullptr;  // [slots]
  int64_t ring_rows = 0;
  CompressorSlots comp, index;  // where the layer has them
};

}  // namespace deepinfer::cuda

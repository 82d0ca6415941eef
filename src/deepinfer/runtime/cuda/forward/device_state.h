// One sequence's decode state on the device (what sequence_state.h holds on the host): per layer
// the sliding-window ring, and for compressed layers the compressors' unfinished window, the
// CSA overlap halves and the emitted entries (the indexer's keys too for CSA). How far each
// compressor got follows from num_tokens, so the host keeps only that count.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/model/deepseek_v4/config.h"
#include "deepinfer/runtime/cuda/forward/slot_views.h"

namespace deepinfer::cuda {

struct DeviceCompressor {
  int ratio = 0, width = 0, dim = 0;
  DeviceBuffer<float> pending_kv, pending_gate;  // [ratio, width]
  DeviceBuffer<float> prev_kv, prev_gate;        // [ratio, dim], CSA
  DeviceBuffer<float> entries;                   // [max_tokens / ratio, dim]
};

struct DeviceLayerState {
  // Position p at row p % ring_rows; ring_rows = window - 1 + the largest chunk, so a chunk's
  // rows never overwrite the window rows its queries still read (sink_attention.h).
  DeviceBuffer<float> ring;
  int64_t ring_rows = 0;
  DeviceCompressor comp;   // ratio > 0
  DeviceCompressor index;  // CSA: the indexer's keys
};

class DeviceSequence {
 public:
  DeviceSequence(const v4::Config& c, int64_t max_tokens, int64_t max_chunk);
  void reset();  // back to an empty sequence
  // This sequence becomes a copy of o (same config and capacities), device to device.
  void copy_from(const DeviceSequence& o, cudaStream_t stream);

  // The device bytes of every state buffer of a sequence of these capacities (what
  // for_each_buffer visits), known before any is allocated.
  static int64_t state_bytes(const v4::Config& c, int64_t max_tokens, int64_t max_chunk);
  // Visits every state buffer as f(float* data, size_t count), in one fixed order: per layer the
  // ring, then the compressor's and the indexer's pending kv and gate, overlap kv and gate,
  // entries (buffers a layer lacks are skipped). Page I/O relies on the order.
  template <typename F>
  void for_each_buffer(F&& f) const {
    auto visit = [&](const DeviceBuffer<float>& b) {
      if (b.size()) f(b.get(), b.size());
    };
    for (const DeviceLayerState& s : layers) {
      visit(s.ring);
      for (const DeviceCompressor* k : {&s.comp, &s.index}) {
        visit(k->pending_kv), visit(k->pending_gate), visit(k->prev_kv), visit(k->prev_gate);
        visit(k->entries);
      }
    }
  }

  std::vector<DeviceLayerState> layers;
  int64_t num_tokens = 0;
  int64_t max_tokens = 0;
};

// Built once per set of sequences; their buffers never move, so the tables stay valid.
class SlotTables {
 public:
  explicit SlotTables(std::vector<DeviceSequence>& seqs);
  const LayerSlots& layer(int l) const { return views_[l]; }

 private:
  float* const* table(const std::vector<float*>& host);  // uploads; null if all entries are
  std::vector<DeviceBuffer<float*>> arrays_;
  std::vector<LayerSlots> views_;
};

}  // namespace deepinfer::cuda

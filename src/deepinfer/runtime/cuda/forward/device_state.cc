#include "deepinfer/runtime/cuda/forward/device_state.h"

#include <limits>

#include "deepinfer/base/check.h"

namespace deepinfer::cuda {
namespace {

void fill(DeviceBuffer<float>& b, float v) {
  if (b.size()) b.upload(std::vector<float>(b.size(), v));
}

DeviceCompressor make_compressor(int ratio, int dim, int64_t max_tokens) {
  DeviceCompressor s;
  s.ratio = ratio;
  s.dim = dim;
  s.width = ratio == 4 ? 2 * dim : dim;  // CSA overlaps windows (spec §6.6)
  s.pending_kv = DeviceBuffer<float>(size_t(ratio) * s.width);
  s.pending_gate = DeviceBuffer<float>(size_t(ratio) * s.width);
  if (s.width == 2 * dim) {
    s.prev_kv = DeviceBuffer<float>(size_t(ratio) * dim);
    s.prev_gate = DeviceBuffer<float>(size_t(ratio) * dim);
  }
  s.entries = DeviceBuffer<float>(size_t(max_tokens / ratio + 1) * dim);
  return s;
}

// Floats of one compressor's buffers, as make_compressor allocates them.
int64_t compressor_floats(int ratio, int dim, int64_t max_tokens) {
  const int64_t width = ratio == 4 ? 2 * dim : dim;
  const int64_t prev = width == 2 * dim ? 2 * int64_t(ratio) * dim : 0;
  return 2 * int64_t(ratio) * width + prev + (max_tokens / ratio + 1) * dim;
}

void reset_compressor(DeviceCompressor& s) {
  const float ninf = -std::numeric_limits<float>::infinity();
  fill(s.pending_kv, 0.0f);
  fill(s.pending_gate, ninf);
  fill(s.prev_kv, 0.0f);
  fill(s.prev_gate, ninf);
}

template <typename T>
void copy(DeviceBuffer<T>& dst, const DeviceBuffer<T>& src, cudaStream_t stream) {
  if (src.size())
    DI_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), src.size() * sizeof(T),
                                  cudaMemcpyDeviceToDevice, stream));
}

void copy_compressor(DeviceCompressor& d, const DeviceCompressor& s, cudaStream_t stream) {
  copy(d.pending_kv, s.pending_kv, stream);
  copy(d.pending_gate, s.pending_gate, stream);
  copy(d.prev_kv, s.prev_kv, stream);
  copy(d.prev_gate, s.prev_gate, stream);
  copy(d.entries, s.entries, stream);
}

}  // namespace

void DeviceSequence::copy_from(const DeviceSequence& o, cudaStream_t stream) {
  for (size_t l = 0; l < layers.size(); ++l) {
    copy(layers[l].ring, o.layers[l].ring, stream);
    copy_compressor(layers[l].comp, o.layers[l].comp, stream);
    copy_compressor(layers[l].index, o.layers[l].index, stream);
  }
  num_tokens = o.num_tokens;
}

int64_t DeviceSequence::state_bytes(const v4::Config& c, int64_t max_tokens, int64_t max_chunk) {
  int64_t floats = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    floats += (c.sliding_window - 1 + max_chunk) * int64_t(c.head_dim);
    const int ratio = c.compress_ratio(l);
    if (ratio > 0) floats += compressor_floats(ratio, c.head_dim, max_tokens);
    if (ratio == 4) floats += compressor_floats(ratio, c.index_head_dim, max_tokens);
  }
  return floats * int64_t(sizeof(float));
}

DeviceSequence::DeviceSequence(const v4::Config& c, int64_t max_tokens, int64_t max_chunk)
    : max_tokens(max_tokens) {
  for (int l = 0; l < c.num_layers; ++l) {
    DeviceLayerState s;
    s.ring_rows = c.sliding_window - 1 + max_chunk;
    s.ring = DeviceBuffer<float>(size_t(s.ring_rows) * c.head_dim);
    const int ratio = c.compress_ratio(l);
    if (ratio > 0) s.comp = make_compressor(ratio, c.head_dim, max_tokens);
    if (ratio == 4) s.index = make_compressor(ratio, c.index_head_dim, max_tokens);
    layers.push_back(std::move(s));
  }
  int64_t bytes = 0;
  for_each_buffer([&](const float*, size_t n) { bytes += int64_t(n * sizeof(float)); });
  DI_CHECK(bytes == state_bytes(c, max_tokens, max_chunk));
  reset();
}

void DeviceSequence::reset() {
  for (DeviceLayerState& s : layers) {
    fill(s.ring, 0.0f);
    reset_compressor(s.comp);
    reset_compressor(s.index);
  }
  num_tokens = 0;
}

float* const* SlotTables::table(const std::vector<float*>& host) {
  bool any = false;
  for (float* p : host) any = any || p != nullptr;
  if (!any) return nullptr;
  arrays_.emplace_back(host);
  return arrays_.back().get();
}

SlotTables::SlotTables(std::vector<DeviceSequence>& seqs) {
  const size_t layers = seqs.empty() ? 0 : seqs[0].layers.size();
  for (size_t l = 0; l < layers; ++l) {
    auto gather = [&](auto member) {
      std::vector<float*> v;
      for (DeviceSequence& s : seqs) v.push_back(member(s.layers[l]).get());
      return table(v);
    };
    auto comp = [&](auto which) {
      CompressorSlots c;
      c.pending_kv = gather([&](DeviceLayerState & s) -> auto& { return which(s).pending_kv; });
      c.pending_gate = gather([&](DeviceLayerState & s) -> auto& { return which(s).pending_gate; });
      c.prev_kv = gather([&](DeviceLayerState & s) -> auto& { return which(s).prev_kv; });
      c.prev_gate = gather([&](DeviceLayerState & s) -> auto& { return which(s).prev_gate; });
      c.entries = gather([&](DeviceLayerState & s) -> auto& { return which(s).entries; });
      return c;
    };
    LayerSlots v;
    v.ring = gather([](DeviceLayerState & s) -> auto& { return s.ring; });
    v.ring_rows = seqs[0].layers[l].ring_rows;
    v.comp = comp([](DeviceLayerState& s) -> DeviceCompressor& { return s.comp; });
    v.index = comp([](DeviceLayerState& s) -> DeviceCompressor& { return s.index; });
    views_.push_back(v);
  }
}

}  // namespace deepinfer::cuda

#include "deepinfer/model/deepseek_v41/sequence_state.h"

namespace deepinfer::v41 {

SequenceState make_sequence_state(const Config& c) {
  SequenceState s;
  s.window.assign(c.num_layers, std::vector<float>(int64_t(c.sliding_window) * c.head_dim));
  s.sources.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.is_kv_source(l)) continue;
    KvSourceState& src = s.sources[l];
    src.ratio = c.compress_ratio(l);
    src.pending_kv.resize(int64_t(src.ratio) * c.head_dim);
    if (src.ratio > 1) src.pending_gate.resize(int64_t(src.ratio) * c.head_dim);
  }
  return s;
}

}  // namespace deepinfer::v41

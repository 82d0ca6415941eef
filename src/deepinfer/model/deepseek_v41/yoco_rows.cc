#include "deepinfer/model/deepseek_v41/yoco_rows.h"

#include <algorithm>

namespace deepinfer::v41 {

int first_trailing_layer(const Config& c) {
  int last_state = -1;
  for (int l = 0; l < c.num_layers; ++l)
    if (c.is_kv_source(l) || c.is_index_source(l) || c.is_candidate_source(l)) last_state = l;
  return last_state + 1;
}

std::vector<LayerRows> yoco_layer_rows(const Config& c, int64_t n, int64_t full_from) {
  std::vector<LayerRows> rows(static_cast<size_t>(c.num_layers));
  if (c.num_layers == 0) return rows;
  const int first = first_trailing_layer(c);
  if (first >= c.num_layers) {
    rows.back().ffn_from = full_from;
    return rows;
  }
  const int64_t W = c.sliding_window;
  int64_t needed = full_from;  // rows whose output the layer above (or the head) reads
  for (int l = c.num_layers - 1; l >= first; --l) {
    LayerRows& r = rows[static_cast<size_t>(l)];
    r.ffn_from = needed;
    r.attn_from = std::clamp<int64_t>(needed - (W - 1), 0, n);
    needed = r.attn_from;
  }
  return rows;
}

}  // namespace deepinfer::v41

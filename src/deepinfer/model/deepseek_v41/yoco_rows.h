// YOCO compact prefill for V4.1 (DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=compact; decision 0007):
// which rows of a forward each layer must compute when only the logits from row `full_from` on
// are needed. The layers after the last one that owns cached state (a KV source, an index
// source, the candidate source) keep nothing but their sliding-window rows, so they run only
// where a needed output or a window row that is read later depends on them:
// - a trailing layer's MoE runs for the rows whose output is needed (s, at most n);
// - its attention for the rows from s - (W - 1) on: a row's window is itself and the W - 1
//   positions before it, so every needed row's window, and the next call's (whose first row
//   reads the last W - 1 positions of this one), come from them; the outputs of the first W - 1
//   of those rows are never read, so their incomplete windows do not matter;
// - the layer below it must then give exact outputs from there on, and so on down.
// Without trailing layers the last layer's MoE alone starts at full_from (V4's form).
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/model/deepseek_v41/config.h"

namespace deepinfer::v41 {

struct LayerRows {
  int64_t attn_from = 0;  // the attention sub-layer runs for rows [attn_from, n)
  int64_t ffn_from = 0;   // the MoE sub-layer for rows [ffn_from, n)
};

// One entry per layer for a forward of n rows whose logits are needed from full_from (in
// [0, n]) on.
std::vector<LayerRows> yoco_layer_rows(const Config& c, int64_t n, int64_t full_from);

// The layers from this one on own no cached state (num_layers when the last one does).
int first_trailing_layer(const Config& c);

}  // namespace deepinfer::v41

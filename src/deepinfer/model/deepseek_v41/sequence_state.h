// What one V4.1 sequence carries between forward calls (spec §11.2, golden_v41 README): per
// layer the sliding-window ring; per KV source its unfinished group, its compressed entries and
// the indexer keys derived from them (shared by its whole group); the Engram n-gram history.
// The candidate blocks and top-k picks are recomputed per query, so they are not state.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/model/deepseek_v41/config.h"

namespace deepinfer::v41 {

// The compressed branch a KV-source layer owns for its group.
struct KvSourceState {
  int ratio = 0;
  int64_t pending = 0;              // tokens of the unfinished group (< ratio)
  std::vector<float> pending_kv;    // ratio rows of head_dim: the raw wkv projections
  std::vector<float> pending_gate;  // ratio rows of head_dim (ratio > 1 only)
  std::vector<float> entries;       // num_entries rows of head_dim: RoPE'd, FP4-rounded latents
  std::vector<float> index_keys;    // num_entries rows of index_head_dim
  int64_t num_entries = 0;
};

struct SequenceState {
  int64_t num_tokens = 0;  // next position
  // Per backbone layer, sliding_window rows of head_dim; position p lives at row p % window.
  std::vector<std::vector<float>> window;
  // Per backbone layer; only KV sources have ratio > 0.
  std::vector<KvSourceState> sources;
  // Engram: the compressed token id of every position so far (n-gram look-back).
  std::vector<int64_t> engram_history;
};

SequenceState make_sequence_state(const Config& c);

}  // namespace deepinfer::v41

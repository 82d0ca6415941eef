// What one V4.1 sequence carries between forward calls (spec §11.2, golden_v41 README): per
// layer the sliding-window ring; per KV source its unfinished group, its compressed entries and
// the indexer keys derived from them (shared by its whole group); the Engram n-gram look-back.
// The candidate blocks and top-k picks are recomputed per query, so they are not state. The
// floats live in pages laid out by state_layout.h; the fields are row pointers into them, and
// v4::StatePages supplies the memory (the runner's pool arena, or heap pages).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "deepinfer/model/deepseek_v4/state_pages.h"
#include "deepinfer/model/deepseek_v41/config.h"
#include "deepinfer/model/deepseek_v41/state_layout.h"

namespace deepinfer::v41 {

// The compressed branch a KV-source layer owns for its group.
struct KvSourceState {
  int ratio = 0;
  int64_t pending = 0;                   // tokens of the unfinished group (< ratio)
  std::vector<float*> pending_kv;        // ratio > 1: ratio rows of head_dim, the raw wkv rows
  std::vector<float*> pending_gate;      // ratio > 1: ratio rows of head_dim
  std::vector<const float*> entries;     // per group: head_dim floats, RoPE'd and FP4-rounded
  std::vector<const float*> index_keys;  // per group: index_head_dim floats
  int64_t num_entries() const { return static_cast<int64_t>(entries.size()); }

  // Rows for the next group's entry and key, in the token page where the group ends.
  void append_entry(float** entry, float** key);

  // Where entries go (set when the state is made or adopted).
  v4::StatePages* pages = nullptr;
  const StateLayout* layout = nullptr;
  const SourceLayout* place = nullptr;
};

// Move-only: the row pointers belong to `pages`.
struct SequenceState {
  int64_t num_tokens = 0;  // next position
  // Per backbone layer, sliding_window rows of head_dim; position p lives at row p % window.
  std::vector<std::vector<float*>> window;
  // Per backbone layer; only KV sources have ratio > 0.
  std::vector<KvSourceState> sources;
  // Engram: the compressed token id (int32 bits) of position p at row p % rows, for the last
  // engram_max_ngram_size - 1 positions (all the n-gram hash looks back). Empty without Engram.
  std::vector<float*> engram_history;

  std::shared_ptr<const StateLayout> layout;
  std::unique_ptr<v4::StatePages> pages;
};

// Page size the standalone states use; the runner picks its own.
inline constexpr int kDefaultPageTokens = 128;

// A fresh state in `pages` laid out as `layout` (both null: heap pages, kDefaultPageTokens).
// Every constant row is initialized, whatever the pages held before.
SequenceState make_sequence_state(const Config& c,
                                  std::shared_ptr<const StateLayout> layout = nullptr,
                                  std::unique_ptr<v4::StatePages> pages = nullptr);

// A state over pages that already hold `num_tokens` tokens of state in `layout` (an earlier
// state's pages, a fork's page copies, page I/O): nothing is initialized; the unfinished groups'
// sizes and the entries' places follow from num_tokens.
SequenceState adopt_sequence_state(const Config& c, std::shared_ptr<const StateLayout> layout,
                                   std::unique_ptr<v4::StatePages> pages, int64_t num_tokens);

}  // namespace deepinfer::v41

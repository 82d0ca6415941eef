// Where every float of a V4.1 sequence's state lives in fixed-size pages: the page model of
// v4::StateLayout (constant pages + token pages of page_tokens tokens, each constant buffer whole
// within one page, a page at least as large as the largest buffer, fp32 on every device) applied
// to V4.1's state (sequence_state.h). Constant: per layer the sliding-window ring, per KV source
// of ratio > 1 its unfinished group, the Engram n-gram look-back. Growing: per KV source only
// (its consumers read it), page p holds the compressed entries and indexer keys of the groups
// that end in tokens [p * page_tokens, (p + 1) * page_tokens).
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/model/deepseek_v4/state_layout.h"  // v4::RowBuffer, v4::RowPlace
#include "deepinfer/model/deepseek_v41/config.h"

namespace deepinfer::v41 {

using v4::RowBuffer;
using v4::RowPlace;

// A KV source's compressed branch.
struct SourceLayout {
  int ratio = 0;                       // 0: the layer is not a KV source
  RowBuffer pending_kv, pending_gate;  // ratio > 1: ratio rows of head_dim
  int entry_dim = 0;                   // head_dim
  int key_dim = 0;                     // index_head_dim
  int64_t entry_offset = 0;            // floats into a token page where the entries begin
  int64_t key_offset = 0;              // ... and the indexer keys
  int slots_per_page = 0;              // most groups that can end in one page
};

struct LayerLayout {
  RowBuffer ring;  // sliding_window rows of head_dim
  SourceLayout source;
};

class StateLayout : public v4::PageGeometry {
 public:
  // page_tokens must be positive.
  StateLayout(const Config& c, int page_tokens);

  // Floats of growing state per page_tokens tokens (a page may be larger: it also holds the
  // largest constant buffer).
  int64_t token_floats_per_page() const { return token_floats_; }
  const std::vector<LayerLayout>& layers() const { return layers_; }  // num_layers
  // engram_max_ngram_size - 1 rows of one float (an int32 compressed id); 0 rows without Engram.
  const RowBuffer& engram_history() const { return engram_history_; }

  // Token page and float offsets of entry e (its compressed KV and its indexer key).
  void entry_place(const SourceLayout& s, int64_t e, int64_t* page, int64_t* entry_offset,
                   int64_t* key_offset) const;

 private:
  int64_t token_floats_ = 0;
  std::vector<LayerLayout> layers_;
  RowBuffer engram_history_;
};

}  // namespace deepinfer::v41

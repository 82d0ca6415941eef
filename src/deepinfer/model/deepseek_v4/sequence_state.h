// Everything one sequence carries between forward calls (spec §7): per layer the sliding-window
// ring, the compressors' unfinished windows and overlap halves, and the emitted compressed
// entries and indexer keys. The floats live in pages (state_layout.h): the fields below are row
// pointers into them. Serializable, so a sequence can be saved and resumed bit-exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/config.h"
#include "deepinfer/model/deepseek_v4/state_layout.h"
#include "deepinfer/model/deepseek_v4/state_pages.h"

namespace deepinfer::v4 {

struct CompressorState {
  int ratio = 0;                     // tokens per entry
  int width = 0;                     // channels per token: 2*dim (CSA, overlapping) or dim (HCA)
  int dim = 0;                       // channels per emitted entry
  int pending = 0;                   // tokens of the unfinished window
  std::vector<float*> pending_kv;    // ratio rows of width
  std::vector<float*> pending_gate;  // ratio rows of width, ape already added
  bool has_prev = false;             // CSA: the A-halves of the last finished window exist
  std::vector<float*> prev_kv;       // CSA: ratio rows of dim (A-half, channels [0, dim))
  std::vector<float*> prev_gate;
  std::vector<const float*> entries;  // emitted entries in order, dim floats each
  int64_t num_entries() const { return static_cast<int64_t>(entries.size()); }

  // The row for the next entry, in the token page where its window ends.
  float* append_entry();

  // Where entries go (set by make_sequence_state).
  StatePages* pages = nullptr;
  const StateLayout* layout = nullptr;
  const CompressorLayout* place = nullptr;
};

struct LayerState {
  std::vector<float*> ring;  // sliding_window rows of head_dim; position p at row p % window
  CompressorState comp;      // ratio > 0
  CompressorState index;     // CSA only: the indexer's compressor (keys)
};

// Move-only: the row pointers belong to `pages`.
struct SequenceState {
  int64_t num_tokens = 0;  // next position
  std::vector<LayerState> layers;
  LayerState mtp;                  // the MTP layer's own ring
  std::vector<float> last_hidden;  // hc_mult x hidden: final HC streams of the last token
  int64_t last_token = -1;

  std::shared_ptr<const StateLayout> layout;
  std::unique_ptr<StatePages> pages;

  bool empty() const { return pages == nullptr; }  // default-constructed: holds nothing
  std::string serialize() const;
  // Into `pages` laid out as `layout` (both null: heap pages, default layout).
  static StatusOr<SequenceState> deserialize(const std::string& bytes, const Config& c,
                                             std::shared_ptr<const StateLayout> layout = nullptr,
                                             std::unique_ptr<StatePages> pages = nullptr);
};

// Page size the standalone states use; the engine picks its own.
inline constexpr int kDefaultPageTokens = 128;

// A fresh state in `pages` laid out as `layout` (both null: heap pages, kDefaultPageTokens).
// Every constant row is initialized, whatever the pages held before.
SequenceState make_sequence_state(const Config& c,
                                  std::shared_ptr<const StateLayout> layout = nullptr,
                                  std::unique_ptr<StatePages> pages = nullptr);

// A state over pages that already hold `num_tokens` tokens of state in `layout` (written by an
// earlier state, a page copy or page I/O): nothing is initialized; the compressors' counts and
// entry places follow from num_tokens. The MTP input (last_hidden, last_token) is not in the
// pages and starts empty.
SequenceState adopt_sequence_state(const Config& c, std::shared_ptr<const StateLayout> layout,
                                   std::unique_ptr<StatePages> pages, int64_t num_tokens);

}  // namespace deepinfer::v4

// Everything one sequence carries between forward calls (spec §7): per layer the sliding-window
// ring, the compressors' unfinished windows and overlap halves, and the emitted compressed
// entries and indexer keys. Serializable, so a sequence can be saved and resumed bit-exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/config.h"

namespace deepinfer::v4 {

struct CompressorState {
  int ratio = 0;                    // tokens per entry
  int width = 0;                    // channels per token: 2*dim (CSA, overlapping) or dim (HCA)
  int dim = 0;                      // channels per emitted entry
  int pending = 0;                  // tokens of the unfinished window
  std::vector<float> pending_kv;    // ratio x width
  std::vector<float> pending_gate;  // ratio x width, ape already added
  bool has_prev = false;            // CSA: the A-halves of the last finished window exist
  std::vector<float> prev_kv;       // CSA: ratio x dim (A-half, channels [0, dim))
  std::vector<float> prev_gate;
  std::vector<float> entries;  // num_entries x dim
  int64_t num_entries() const { return dim ? static_cast<int64_t>(entries.size()) / dim : 0; }
};

struct LayerState {
  std::vector<float> ring;  // sliding_window x head_dim; row for position p at p % window
  CompressorState comp;     // ratio > 0
  CompressorState index;    // CSA only: the indexer's compressor (keys)
};

struct SequenceState {
  int64_t num_tokens = 0;  // next position
  std::vector<LayerState> layers;
  LayerState mtp;                  // the MTP layer's own ring
  std::vector<float> last_hidden;  // hc_mult x hidden: final HC streams of the last token
  int64_t last_token = -1;

  std::string serialize() const;
  static StatusOr<SequenceState> deserialize(const std::string& bytes, const Config& c);
};

SequenceState make_sequence_state(const Config& c);

}  // namespace deepinfer::v4

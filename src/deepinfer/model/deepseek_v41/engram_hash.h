// Engram n-gram hashing (V4.1, spec §11.2 item 7; ENGRAM.md): compressed token ids of a sequence
// -> per position, per Engram layer, the table rows of the 2..N-grams ending there.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::v41 {

// The config fields Engram hashing needs (text_config names in comments).
struct EngramHashParams {
  std::vector<int32_t> layer_ids;       // engram_layer_ids
  int32_t max_ngram_size = 0;           // engram_max_ngram_size (N >= 2)
  int32_t n_heads = 0;                  // engram_n_heads
  int64_t vocab_size = 0;               // engram_vocab_size: every prime is >= it
  int64_t compressed_vocab_size = 0;    // engram_compressed_vocab_size (sizes the multipliers)
  int64_t pad_id = 0;                   // compressed id of engram_pad_id (token_map[pad])
  std::vector<int64_t> num_embeddings;  // engram_num_embeddings; checked when not empty
};

class EngramHasher {
 public:
  // History entry of a position that n-grams must not span (an image token).
  static constexpr int64_t kDead = -1;

  // Draws the primes, offsets and multipliers. Errors name the config field.
  static StatusOr<EngramHasher> create(const EngramHashParams& params);

  int n_layers() const { return static_cast<int>(layer_ids_.size()); }
  // Hash columns per layer: (N - 1) * n_heads, n = 2..N outer, heads inner.
  int n_cols() const { return n_cols_; }
  // [layer][col]: the prime of that column, and its first row in the layer's table.
  int64_t prime(int layer, int col) const { return primes_[layer * n_cols_ + col]; }
  int64_t offset(int layer, int col) const { return offsets_[layer * n_cols_ + col]; }
  // [layer][look-back]: odd multipliers, numpy.default_rng(10007 * layer_id).
  int64_t multiplier(int layer, int lookback) const {
    return multipliers_[layer * max_ngram_size_ + lookback];
  }

  // `history[p]` is the compressed id at absolute position p (kDead where n-grams stop) and must
  // cover [0, end). Writes rows for positions [begin, end) to `out`, laid out
  // [end - begin][n_layers][n_cols]. Look-back before position 0 or across a kDead reads pad_id.
  void hash(std::span<const int64_t> history, int64_t begin, int64_t end,
            std::span<int64_t> out) const {
    hash(history, 0, begin, end, out);
  }
  // The same from a window of the history: `history[i]` is the id at position history_begin + i,
  // and it must cover [max(0, begin - (N - 1)), end), all the look-back these positions have (a
  // sequence keeps only the last N - 1 ids between calls).
  void hash(std::span<const int64_t> history, int64_t history_begin, int64_t begin, int64_t end,
            std::span<int64_t> out) const;

 private:
  std::vector<int32_t> layer_ids_;
  int32_t max_ngram_size_ = 0;
  int32_t n_heads_ = 0;
  int32_t n_cols_ = 0;
  int64_t pad_id_ = 0;
  std::vector<int64_t> primes_;       // [layer][col]
  std::vector<int64_t> offsets_;      // [layer][col]
  std::vector<int64_t> multipliers_;  // [layer][look-back]
};

}  // namespace deepinfer::v41

#include "deepinfer/model/deepseek_v41/engram_hash.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_set>

#include "deepinfer/base/check.h"
#include "deepinfer/model/deepseek_v41/engram_numpy_rng.h"

namespace deepinfer::v41 {
namespace {

bool is_prime(int64_t n) {
  if (n < 2) return false;
  if (n % 2 == 0) return n == 2;
  for (int64_t d = 3; d <= n / d; d += 2)
    if (n % d == 0) return false;
  return true;
}

// Python's floor modulo (torch's `%` on int64 follows it).
int64_t floor_mod(int64_t a, int64_t p) {
  const int64_t r = a % p;
  return r < 0 ? r + p : r;
}

}  // namespace

StatusOr<EngramHasher> EngramHasher::create(const EngramHashParams& params) {
  if (params.max_ngram_size < 2)
    return invalid_argument("engram_max_ngram_size must be >= 2, got " +
                            std::to_string(params.max_ngram_size));
  if (params.n_heads < 1)
    return invalid_argument("engram_n_heads must be >= 1, got " + std::to_string(params.n_heads));
  if (params.vocab_size < 1)
    return invalid_argument("engram_vocab_size must be >= 1, got " +
                            std::to_string(params.vocab_size));
  if (params.compressed_vocab_size < 1)
    return invalid_argument("engram_compressed_vocab_size must be >= 1, got " +
                            std::to_string(params.compressed_vocab_size));
  if (params.pad_id < 0 || params.pad_id >= params.compressed_vocab_size)
    return invalid_argument("engram pad id (compressed) " + std::to_string(params.pad_id) +
                            " is outside engram_compressed_vocab_size");
  if (!params.num_embeddings.empty() && params.num_embeddings.size() != params.layer_ids.size())
    return invalid_argument("engram_num_embeddings has " +
                            std::to_string(params.num_embeddings.size()) + " entries for " +
                            std::to_string(params.layer_ids.size()) + " engram_layer_ids");
  for (int32_t id : params.layer_ids)
    if (id < 0) return invalid_argument("engram_layer_ids has a negative id " + std::to_string(id));

  EngramHasher h;
  h.layer_ids_ = params.layer_ids;
  h.max_ngram_size_ = params.max_ngram_size;
  h.n_heads_ = params.n_heads;
  h.n_cols_ = (params.max_ngram_size - 1) * params.n_heads;
  h.pad_id_ = params.pad_id;

  // Primes: per (layer, n) count up from vocab_size - 1, skipping every prime already taken by
  // any earlier layer or n, so all columns of all layers have distinct primes.
  std::unordered_set<int64_t> taken;
  for (size_t layer = 0; layer < params.layer_ids.size(); ++layer) {
    int64_t row = 0;
    for (int n = 2; n <= params.max_ngram_size; ++n) {
      int64_t current = params.vocab_size - 1;
      for (int head = 0; head < params.n_heads; ++head) {
        do ++current;
        while (!is_prime(current) || taken.count(current));
        taken.insert(current);
        h.primes_.push_back(current);
        h.offsets_.push_back(row);
        row += current;
      }
    }
    if (!params.num_embeddings.empty() && params.num_embeddings[layer] != row)
      return invalid_argument(
          "engram_num_embeddings[" + std::to_string(layer) + "] is " +
          std::to_string(params.num_embeddings[layer]) + " but the hash buckets of layer " +
          std::to_string(params.layer_ids[layer]) + " need " + std::to_string(row) + " rows");
  }

  // Multipliers: odd, and small enough that id * multiplier cannot overflow int64.
  const int64_t bound = std::max<int64_t>(
      1, (std::numeric_limits<int64_t>::max() / params.compressed_vocab_size) / 2);
  for (int32_t layer_id : params.layer_ids) {
    NumpyPcg64 generator(10007ull * static_cast<uint64_t>(layer_id));
    auto values = numpy_integers_int64(&generator, 0, bound, params.max_ngram_size);
    if (!values.ok()) return values.status().with_context("engram hash multipliers");
    for (int64_t v : *values) h.multipliers_.push_back(v * 2 + 1);
  }
  return h;
}

void EngramHasher::hash(std::span<const int64_t> history, int64_t history_begin, int64_t begin,
                        int64_t end, std::span<int64_t> out) const {
  DI_CHECK(0 <= begin && begin <= end &&
           end - history_begin <= static_cast<int64_t>(history.size()));
  DI_CHECK(history_begin >= 0 &&
           history_begin <= std::max<int64_t>(0, begin - (max_ngram_size_ - 1)));
  const int64_t row_size = static_cast<int64_t>(layer_ids_.size()) * n_cols_;
  DI_CHECK(static_cast<int64_t>(out.size()) == (end - begin) * row_size);
  std::vector<int64_t> tokens(max_ngram_size_);
  for (int64_t pos = begin; pos < end; ++pos) {
    bool blocked = false;
    for (int shift = 0; shift < max_ngram_size_; ++shift) {
      const int64_t id = pos >= shift ? history[pos - shift - history_begin] : kDead;
      blocked = blocked || id == kDead;
      tokens[shift] = blocked ? pad_id_ : id;
    }
    int64_t* row = out.data() + (pos - begin) * row_size;
    for (size_t layer = 0; layer < layer_ids_.size(); ++layer) {
      const int64_t* mult = multipliers_.data() + layer * max_ngram_size_;
      // Wrapping products, as torch's int64 multiply (they cannot overflow for valid ids).
      uint64_t rolling = static_cast<uint64_t>(tokens[0]) * static_cast<uint64_t>(mult[0]);
      for (int i = 1; i < max_ngram_size_; ++i) {
        rolling ^= static_cast<uint64_t>(tokens[i]) * static_cast<uint64_t>(mult[i]);
        for (int head = 0; head < n_heads_; ++head) {
          const int col = (i - 1) * n_heads_ + head;
          const size_t at = layer * n_cols_ + col;
          row[at] = floor_mod(static_cast<int64_t>(rolling), primes_[at]) + offsets_[at];
        }
      }
    }
  }
}

}  // namespace deepinfer::v41

// Per-sequence page accounting over one BlockPool sized from a memory budget. Each sequence holds
// its constant state (rings, compressor windows; counted as whole pages) plus one page per
// page_tokens tokens of growing state. Pure bookkeeping: the runtime owns the memory the page ids
// index.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/kv/block_pool.h"
#include "deepinfer/kv/kv_geometry.h"

namespace deepinfer::kv {

struct KvCapacity {
  int64_t num_pages = 0;      // pages in the pool
  int64_t max_tokens = 0;     // the most tokens one sequence can hold (alone in the pool)
  int64_t max_sequences = 0;  // the most sequences of one page each held at once
};

class KvManager {
 public:
  // Pools beyond this many pages are clamped (bounds the bookkeeping arrays at 128 MiB).
  static constexpr int64_t kMaxPages = int64_t{1} << 24;

  // Errors (invalid_argument naming --kv-memory) when the budget can't hold one sequence of one
  // page, or the geometry has no growing state to page.
  static StatusOr<KvManager> create(const KvGeometry& g, int64_t memory_budget_bytes);

  KvCapacity capacity() const;
  const KvGeometry& geometry() const { return geometry_; }

  // Ensures seq has pages for total_tokens tokens, allocating its constant reservation on the
  // first call. Returns false, allocating nothing, when the pool can't cover it. Never shrinks.
  bool reserve(uint64_t seq_id, int64_t total_tokens);
  // Pages reserve() would take to grow from current_tokens to total_tokens (plus the constant
  // reservation for a new sequence).
  int64_t pages_needed(int64_t current_tokens, int64_t total_tokens, bool new_seq) const;
  // Tokens seq's pages already cover (0 for an unknown seq).
  int64_t reserved_tokens(uint64_t seq_id) const;
  bool contains(uint64_t seq_id) const { return seqs_.count(seq_id) != 0; }

  void free(uint64_t seq_id);  // returns every page; no-op for an unknown seq

  // Growing-state pages: entry i covers tokens [i*page_tokens, (i+1)*page_tokens). nullptr for an
  // unknown seq.
  const std::vector<int32_t>* block_table(uint64_t seq_id) const;
  // The pages standing for seq's constant state (constant_pages_per_seq of them).
  const std::vector<int32_t>* state_pages(uint64_t seq_id) const;

  int64_t num_free_pages() const { return pool_.num_free(); }
  int64_t num_total_pages() const { return pool_.num_total(); }
  int64_t num_sequences() const { return static_cast<int64_t>(seqs_.size()); }
  const BlockPool& pool() const { return pool_; }

 private:
  struct SeqPages {
    std::vector<int32_t> state;
    std::vector<int32_t> table;
  };
  KvManager(const KvGeometry& g, int64_t num_pages) : geometry_(g), pool_(num_pages) {}

  KvGeometry geometry_;
  int64_t constant_pages_ = 0;
  BlockPool pool_;
  std::unordered_map<uint64_t, SeqPages> seqs_;
};

}  // namespace deepinfer::kv

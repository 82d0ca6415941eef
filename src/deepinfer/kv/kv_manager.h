// Per-sequence page accounting over one BlockPool of the size a PageSpec gives. Each sequence
// holds its constant state (rings, compressor windows) as constant_pages_per_seq pages plus one
// page per page_tokens tokens of growing state; a forked sequence shares its parent's full token
// pages. Pure bookkeeping: the runtime owns the memory the page ids index.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/kv/block_pool.h"
#include "deepinfer/kv/page_spec.h"

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

  // A pool of spec.num_pages pages (clamped to kMaxPages). invalid_argument naming the field when
  // page_tokens or page_bytes isn't positive, constant_pages_per_seq is negative, or the pool
  // can't hold one sequence (constant_pages_per_seq + 1 pages).
  static StatusOr<KvManager> create(const PageSpec& spec);

  KvCapacity capacity() const;
  // num_pages is the pool's actual size (after clamping).
  const PageSpec& spec() const { return spec_; }

  // Ensures seq has pages for total_tokens tokens, allocating its constant reservation on the
  // first call. Returns false, allocating nothing, when the pool can't cover it. Never shrinks.
  bool reserve(uint64_t seq_id, int64_t total_tokens);
  // Pages reserve() would take to grow from current_tokens to total_tokens (plus the constant
  // reservation for a new sequence).
  int64_t pages_needed(int64_t current_tokens, int64_t total_tokens, bool new_seq) const;
  // Tokens seq's pages already cover (0 for an unknown seq).
  int64_t reserved_tokens(uint64_t seq_id) const;
  bool contains(uint64_t seq_id) const { return seqs_.count(seq_id) != 0; }

  // Starts `child` (unknown) from the first `tokens` tokens of `parent`'s state (parent must hold
  // pages for them), as for n > 1 sampling. The parent's full token pages (all of their tokens
  // below `tokens`) are shared: neither sequence writes them again. The constant pages, which
  // decoding mutates, and a partly filled last token page are fresh pages for the child; each
  // gets a PageCopy{parent page, child page} appended to *copies, which the runtime must do
  // before either sequence runs again. Returns false, allocating nothing, when the pool can't
  // cover the fresh pages.
  bool fork(uint64_t parent, uint64_t child, int64_t tokens, std::vector<PageCopy>* copies);

  // Releases every page seq holds; a shared page returns to the pool with its last holder. No-op
  // for an unknown seq.
  void free(uint64_t seq_id);

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
  explicit KvManager(const PageSpec& spec) : spec_(spec), pool_(spec.num_pages) {}

  PageSpec spec_;
  BlockPool pool_;
  std::unordered_map<uint64_t, SeqPages> seqs_;
};

}  // namespace deepinfer::kv

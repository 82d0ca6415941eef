// Per-sequence page accounting over one BlockPool of the size a PageSpec gives. Each sequence
// holds its constant state (rings, compressor windows) as constant_pages_per_seq pages plus one
// page per page_tokens tokens of growing state; a forked sequence shares its parent's full token
// pages. Pure bookkeeping: the runtime owns the memory the page ids index.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/kv/block_pool.h"
#include "deepinfer/kv/page_spec.h"
#include "deepinfer/kv/prefix_cache.h"

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

  // ---- Prefix cache, device tier (prefix_cache.h): units live in pool pages beside sequences.
  // Pages only the cache holds are evictable: reserve() and fork() evict them, least recently
  // used first, before they report the pool full.

  // The longest cached prefix of `keys` (a sequence's chain, kv/unit_key.h) that ends at a
  // snapshot and is at most max_tokens long.
  PrefixMatch match_prefix(std::span<const UnitKey> keys, int64_t max_tokens, int64_t now_s) const {
    return cache_.match(keys, max_tokens, now_s);
  }
  // Starts the unknown `seq_id` from that prefix: its block table shares the units' pages, its
  // constant pages are fresh, each with a PageCopy{snapshot page, constant page} appended to
  // *copies (the runtime does them before the sequence runs). The units' expiry is extended to
  // at least extend_to_s. Returns the tokens attached; 0 (nothing changed) without a match or
  // pages for the constant state.
  int64_t attach_prefix(uint64_t seq_id, std::span<const UnitKey> keys, int64_t max_tokens,
                        int64_t now_s, int64_t extend_to_s, std::vector<PageCopy>* copies);

  struct CachedPages {
    UnitKey key;
    int32_t page = -1;
    std::vector<int32_t> snapshot;  // empty unless this call created the snapshot
    bool new_unit = false;          // the unit was not cached before this call
  };
  // Caches seq's blocks 0..keys.size()-1 (the sequence holds state for all of them); unit i's
  // parent is keys[i-1], or `root` for i = 0. Cached units get their expiry extended. With
  // snapshot_at_end, the last unit gets a snapshot of the sequence's constant pages as they
  // are now (which the caller must make the state at exactly that unit's end): fresh pages, with
  // PageCopy{constant page, snapshot page} appended to *copies, done before the sequence runs
  // again; skipped when the pool has no room. Returns the units created or given a snapshot.
  std::vector<CachedPages> publish(uint64_t seq_id, std::span<const UnitKey> keys,
                                   const UnitKey& root, bool snapshot_at_end, int64_t expires_at_s,
                                   Retention r, std::vector<PageCopy>* copies);
  // Snapshots taken inside a prefill row (runtime::RowSnapshot): constant_pages_per_seq fresh
  // pages, held by the caller until publish_with_snapshot takes them or release_pages returns
  // them; nullopt when the pool has no room.
  std::optional<std::vector<int32_t>> allocate_snapshot() {
    return allocate_pages(spec_.constant_pages_per_seq);
  }
  void release_pages(const std::vector<int32_t>& pages) {
    for (int32_t p : pages) release_page(p);
  }
  // publish, the last unit's snapshot being `snapshot` (allocate_snapshot's pages, holding the
  // state at that unit's end): the cache takes them, or they go back to the pool when the unit
  // has a snapshot already.
  std::vector<CachedPages> publish_with_snapshot(uint64_t seq_id, std::span<const UnitKey> keys,
                                                 const UnitKey& root, std::vector<int32_t> snapshot,
                                                 int64_t expires_at_s, Retention r);
  // Promotion from a lower tier: pages (refcount 1, held by the cache) for a unit not yet cached,
  // or for the snapshot of a cached unit without one; the caller writes the bytes and drops the
  // unit if that fails. nullopt when the pool has no room.
  std::optional<CachedPages> adopt(const UnitKey& key, const UnitKey& parent, int64_t end_tokens,
                                   bool with_snapshot, int64_t expires_at_s, Retention r);
  // Holds a cached unit's page so it can't be evicted (e.g. while the rest of its chain is
  // promoted); false if not cached. Each pin needs one unpin.
  bool pin(const UnitKey& key);
  // attach_prefix protects the snapshots it copies from until this is called, once the plan
  // holding those copies has run (the engine calls it after each step; the scheduler also as
  // each new plan starts).
  void clear_protected() { cache_.clear_protected(); }
  void unpin(const UnitKey& key);
  int64_t expire_cache(int64_t now_s) { return cache_.expire(now_s); }
  bool drop_unit(const UnitKey& key) { return cache_.drop(key); }
  void drop_snapshot(const UnitKey& key) { cache_.drop_snapshot(key); }
  const PrefixCache& cache() const { return cache_; }

  int64_t num_free_pages() const { return pool_.num_free(); }
  // Free pages plus pages only the prefix cache holds (what reserve() can take).
  int64_t num_available_pages() const { return pool_.num_free() + cache_.evictable_pages(); }
  int64_t num_total_pages() const { return pool_.num_total(); }
  int64_t num_sequences() const { return static_cast<int64_t>(seqs_.size()); }
  const BlockPool& pool() const { return pool_; }

 private:
  struct SeqPages {
    std::vector<int32_t> state;
    std::vector<int32_t> table;
  };
  explicit KvManager(const PageSpec& spec) : spec_(spec), pool_(spec.num_pages) {}

 public:
  // The cache points at pool_, so a copy or move re-points it.
  KvManager(const KvManager& o) : spec_(o.spec_), pool_(o.pool_), seqs_(o.seqs_), cache_(o.cache_) {
    cache_.rebind(&pool_);
  }
  KvManager(KvManager&& o) noexcept
      : spec_(o.spec_),
        pool_(std::move(o.pool_)),
        seqs_(std::move(o.seqs_)),
        cache_(std::move(o.cache_)) {
    cache_.rebind(&pool_);
  }
  KvManager& operator=(KvManager o) noexcept {
    spec_ = o.spec_;
    pool_ = std::move(o.pool_);
    seqs_ = std::move(o.seqs_);
    cache_ = std::move(o.cache_);
    cache_.rebind(&pool_);
    return *this;
  }

 private:
  // Sequence-side reference changes, which tell the cache when a cached page becomes (un)used.
  void retain_page(int32_t page);
  void release_page(int32_t page);
  // Evicts cached units until n pages are free; false when even that can't.
  bool ensure_free(int64_t n);
  std::optional<std::vector<int32_t>> allocate_pages(int64_t n);
  // publish's units (without snapshots) into *out.
  void insert_units(uint64_t seq_id, std::span<const UnitKey> keys, const UnitKey& root,
                    int64_t expires_at_s, Retention r, std::vector<CachedPages>* out);

  PageSpec spec_;
  BlockPool pool_;
  std::unordered_map<uint64_t, SeqPages> seqs_;
  PrefixCache cache_{&pool_};
};

}  // namespace deepinfer::kv

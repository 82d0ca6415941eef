#include "deepinfer/kv/kv_manager.h"

#include <algorithm>
#include <string>

#include "deepinfer/base/check.h"

namespace deepinfer::kv {

StatusOr<KvManager> KvManager::create(const PageSpec& spec) {
  if (spec.page_tokens <= 0)
    return invalid_argument("kv: page_tokens must be positive, got " +
                            std::to_string(spec.page_tokens));
  if (spec.page_bytes <= 0)
    return invalid_argument("kv: page_bytes must be positive, got " +
                            std::to_string(spec.page_bytes));
  if (spec.constant_pages_per_seq < 0)
    return invalid_argument("kv: constant_pages_per_seq must be >= 0, got " +
                            std::to_string(spec.constant_pages_per_seq));
  PageSpec s = spec;
  s.num_pages = std::clamp<int64_t>(spec.num_pages, 0, kMaxPages);
  if (s.num_pages < s.constant_pages_per_seq + 1) {
    return invalid_argument(
        "kv: num_pages " + std::to_string(spec.num_pages) + " can't hold one sequence: it needs " +
        std::to_string(s.constant_pages_per_seq + 1) + " pages (constant_pages_per_seq " +
        std::to_string(s.constant_pages_per_seq) + " + 1 page of " + std::to_string(s.page_tokens) +
        " tokens, " + std::to_string(s.page_bytes) + " bytes each)");
  }
  return KvManager(s);
}

KvCapacity KvManager::capacity() const {
  KvCapacity c;
  c.num_pages = num_total_pages();
  c.max_tokens = (c.num_pages - spec_.constant_pages_per_seq) * spec_.page_tokens;
  c.max_sequences = c.num_pages / (spec_.constant_pages_per_seq + 1);
  return c;
}

int64_t KvManager::pages_needed(int64_t current_tokens, int64_t total_tokens, bool new_seq) const {
  const int64_t grow = std::max<int64_t>(
      0, spec_.pages_for_tokens(total_tokens) - spec_.pages_for_tokens(current_tokens));
  return grow + (new_seq ? spec_.constant_pages_per_seq : 0);
}

int64_t KvManager::reserved_tokens(uint64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return 0;
  return static_cast<int64_t>(it->second.table.size()) * spec_.page_tokens;
}

void KvManager::retain_page(int32_t page) {
  if (pool_.refcount(page) == 1 && cache_.is_cached_page(page)) cache_.on_page_referenced(page);
  pool_.retain(page);
}

void KvManager::release_page(int32_t page) {
  pool_.release(page);
  if (pool_.refcount(page) == 1 && cache_.is_cached_page(page)) cache_.on_page_unreferenced(page);
}

bool KvManager::ensure_free(int64_t n) {
  if (n > num_available_pages()) return false;
  if (pool_.num_free() < n) cache_.evict(n - pool_.num_free());
  return pool_.num_free() >= n;
}

std::optional<std::vector<int32_t>> KvManager::allocate_pages(int64_t n) {
  if (!ensure_free(n)) return std::nullopt;
  std::vector<int32_t> pages;
  pages.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pages.push_back(*pool_.allocate());
  return pages;
}

bool KvManager::reserve(uint64_t seq_id, int64_t total_tokens) {
  auto it = seqs_.find(seq_id);
  const bool new_seq = it == seqs_.end();
  const int64_t have = new_seq ? 0 : static_cast<int64_t>(it->second.table.size());
  const int64_t grow = std::max<int64_t>(0, spec_.pages_for_tokens(total_tokens) - have);
  const int64_t need = grow + (new_seq ? spec_.constant_pages_per_seq : 0);
  // Checked up front so a failure leaves the pool untouched.
  if (!ensure_free(need)) return false;
  if (new_seq) {
    it = seqs_.emplace(seq_id, SeqPages{}).first;
    it->second.state.reserve(static_cast<size_t>(spec_.constant_pages_per_seq));
    for (int64_t i = 0; i < spec_.constant_pages_per_seq; ++i)
      it->second.state.push_back(*pool_.allocate());
  }
  for (int64_t i = 0; i < grow; ++i) it->second.table.push_back(*pool_.allocate());
  return true;
}

int64_t KvManager::attach_prefix(uint64_t seq_id, std::span<const UnitKey> keys, int64_t max_tokens,
                                 int64_t now_s, int64_t extend_to_s,
                                 std::vector<PageCopy>* copies) {
  DI_CHECK(copies != nullptr && !contains(seq_id));
  const PrefixMatch m = cache_.match(keys, max_tokens, now_s);
  if (m.num_units == 0) return 0;
  SeqPages pages;
  // Hold the chain and its snapshot first, so finding room for the constant pages can't evict
  // them; the snapshot stays protected until the plan's copies ran (clear_protected).
  cache_.protect(keys[m.num_units - 1]);
  for (int64_t i = 0; i < m.num_units; ++i) {
    const int32_t p = cache_.find(keys[i])->page;
    retain_page(p);
    pages.table.push_back(p);
  }
  std::optional<std::vector<int32_t>> state = allocate_pages(spec_.constant_pages_per_seq);
  if (!state) {
    for (int32_t p : pages.table) release_page(p);
    return 0;
  }
  pages.state = std::move(*state);
  const std::vector<int32_t>& snap = cache_.find(keys[m.num_units - 1])->snapshot;
  DI_CHECK(snap.size() == pages.state.size());
  for (size_t i = 0; i < snap.size(); ++i) copies->push_back(PageCopy{snap[i], pages.state[i]});
  // Earlier units most recently used last, so an LRU eviction takes a chain's tail first.
  for (int64_t i = m.num_units - 1; i >= 0; --i) cache_.touch(keys[i], extend_to_s);
  seqs_.emplace(seq_id, std::move(pages));
  return m.end_tokens;
}

void KvManager::insert_units(uint64_t seq_id, std::span<const UnitKey> keys, const UnitKey& root,
                             int64_t expires_at_s, Retention r, std::vector<CachedPages>* out) {
  auto it = seqs_.find(seq_id);
  DI_CHECK(it != seqs_.end() && keys.size() <= it->second.table.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const int32_t page = it->second.table[i];
    const int64_t end = static_cast<int64_t>(i + 1) * spec_.page_tokens;
    if (cache_.insert(keys[i], i == 0 ? root : keys[i - 1], end, page, expires_at_s, r)) {
      out->push_back({keys[i], page, {}, true});
    } else {
      cache_.touch(keys[i], expires_at_s);
    }
  }
}

std::vector<KvManager::CachedPages> KvManager::publish(uint64_t seq_id,
                                                       std::span<const UnitKey> keys,
                                                       const UnitKey& root, bool snapshot_at_end,
                                                       int64_t expires_at_s, Retention r,
                                                       std::vector<PageCopy>* copies) {
  DI_CHECK(copies != nullptr);
  std::vector<CachedPages> out;
  insert_units(seq_id, keys, root, expires_at_s, r, &out);
  if (snapshot_at_end && !keys.empty() && cache_.find(keys.back())->snapshot.empty()) {
    // The cached unit may be another sequence's page (both computed the block), held by the
    // cache alone: hold it while making room, so the room isn't made by evicting it.
    const int32_t unit_page = cache_.find(keys.back())->page;
    retain_page(unit_page);
    std::optional<std::vector<int32_t>> snap = allocate_pages(spec_.constant_pages_per_seq);
    release_page(unit_page);
    if (snap) {
      const std::vector<int32_t>& state = seqs_.at(seq_id).state;
      for (size_t i = 0; i < state.size(); ++i) copies->push_back(PageCopy{state[i], (*snap)[i]});
      if (out.empty() || out.back().key != keys.back())
        out.push_back({keys.back(), unit_page, {}, false});
      out.back().snapshot = *snap;
      cache_.set_snapshot(keys.back(), std::move(*snap));
    }
  }
  return out;
}

std::vector<KvManager::CachedPages> KvManager::publish_with_snapshot(
    uint64_t seq_id, std::span<const UnitKey> keys, const UnitKey& root,
    std::vector<int32_t> snapshot, int64_t expires_at_s, Retention r) {
  DI_CHECK(!keys.empty() && static_cast<int64_t>(snapshot.size()) == spec_.constant_pages_per_seq);
  std::vector<CachedPages> out;
  insert_units(seq_id, keys, root, expires_at_s, r, &out);
  const PrefixCache::Unit* u = cache_.find(keys.back());
  if (!u->snapshot.empty()) {
    release_pages(snapshot);
    return out;
  }
  if (out.empty() || out.back().key != keys.back())
    out.push_back({keys.back(), u->page, {}, false});
  out.back().snapshot = snapshot;
  cache_.set_snapshot(keys.back(), std::move(snapshot));
  return out;
}

std::optional<KvManager::CachedPages> KvManager::adopt(const UnitKey& key, const UnitKey& parent,
                                                       int64_t end_tokens, bool with_snapshot,
                                                       int64_t expires_at_s, Retention r) {
  const PrefixCache::Unit* u = cache_.find(key);
  if (u != nullptr && (!with_snapshot || !u->snapshot.empty())) return std::nullopt;
  const int64_t snap_pages = with_snapshot ? spec_.constant_pages_per_seq : 0;
  if (u != nullptr) {
    // Hold the unit so making room for its snapshot can't evict it.
    const int32_t page = u->page;
    retain_page(page);
    std::optional<std::vector<int32_t>> snap = allocate_pages(snap_pages);
    release_page(page);
    if (!snap) return std::nullopt;
    CachedPages c{key, page, *snap, false};
    cache_.set_snapshot(key, std::move(*snap));
    return c;
  }
  std::optional<std::vector<int32_t>> pages = allocate_pages(1 + snap_pages);
  if (!pages) return std::nullopt;
  const int32_t page = (*pages)[0];
  CachedPages c{key, page, std::vector<int32_t>(pages->begin() + 1, pages->end()), true};
  cache_.insert(key, parent, end_tokens, page, expires_at_s, r);
  pool_.release(page);  // the cache's reference is now the only one: evictable
  cache_.on_page_unreferenced(page);
  if (with_snapshot) cache_.set_snapshot(key, c.snapshot);
  return c;
}

bool KvManager::pin(const UnitKey& key) {
  const PrefixCache::Unit* u = cache_.find(key);
  if (u == nullptr) return false;
  retain_page(u->page);
  return true;
}

void KvManager::unpin(const UnitKey& key) {
  const PrefixCache::Unit* u = cache_.find(key);
  DI_CHECK(u != nullptr);
  release_page(u->page);
}

bool KvManager::fork(uint64_t parent, uint64_t child, int64_t tokens,
                     std::vector<PageCopy>* copies) {
  DI_CHECK(copies != nullptr);
  DI_CHECK(parent != child && !contains(child));
  auto pit = seqs_.find(parent);
  DI_CHECK(pit != seqs_.end());
  DI_CHECK(tokens >= 0 && tokens <= reserved_tokens(parent));
  const int64_t shared = tokens / spec_.page_tokens;
  const bool partial = tokens % spec_.page_tokens != 0;
  if (!ensure_free(spec_.constant_pages_per_seq + (partial ? 1 : 0))) return false;

  const SeqPages& from = pit->second;
  SeqPages pages;
  pages.state.reserve(from.state.size());
  pages.table.reserve(static_cast<size_t>(spec_.pages_for_tokens(tokens)));
  for (int32_t p : from.state) {
    const int32_t fresh = *pool_.allocate();
    copies->push_back(PageCopy{p, fresh});
    pages.state.push_back(fresh);
  }
  for (int64_t i = 0; i < shared; ++i) {
    retain_page(from.table[i]);
    pages.table.push_back(from.table[i]);
  }
  if (partial) {
    const int32_t fresh = *pool_.allocate();
    copies->push_back(PageCopy{from.table[shared], fresh});
    pages.table.push_back(fresh);
  }
  seqs_.emplace(child, std::move(pages));
  return true;
}

void KvManager::free(uint64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  for (int32_t p : it->second.state) release_page(p);
  // Last block first: cached units become evictable tail first, so an LRU eviction shortens a
  // chain from its end instead of cutting it at the start.
  for (auto p = it->second.table.rbegin(); p != it->second.table.rend(); ++p) release_page(*p);
  seqs_.erase(it);
}

const std::vector<int32_t>* KvManager::block_table(uint64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? nullptr : &it->second.table;
}

const std::vector<int32_t>* KvManager::state_pages(uint64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? nullptr : &it->second.state;
}

}  // namespace deepinfer::kv

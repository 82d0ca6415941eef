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

bool KvManager::reserve(uint64_t seq_id, int64_t total_tokens) {
  auto it = seqs_.find(seq_id);
  const bool new_seq = it == seqs_.end();
  const int64_t have = new_seq ? 0 : static_cast<int64_t>(it->second.table.size());
  const int64_t grow = std::max<int64_t>(0, spec_.pages_for_tokens(total_tokens) - have);
  const int64_t need = grow + (new_seq ? spec_.constant_pages_per_seq : 0);
  // Checked up front so a failure leaves the pool untouched.
  if (need > pool_.num_free()) return false;
  if (new_seq) {
    it = seqs_.emplace(seq_id, SeqPages{}).first;
    it->second.state.reserve(static_cast<size_t>(spec_.constant_pages_per_seq));
    for (int64_t i = 0; i < spec_.constant_pages_per_seq; ++i)
      it->second.state.push_back(*pool_.allocate());
  }
  for (int64_t i = 0; i < grow; ++i) it->second.table.push_back(*pool_.allocate());
  return true;
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
  if (spec_.constant_pages_per_seq + (partial ? 1 : 0) > pool_.num_free()) return false;

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
    pool_.retain(from.table[i]);
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
  for (int32_t p : it->second.state) pool_.release(p);
  for (int32_t p : it->second.table) pool_.release(p);
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

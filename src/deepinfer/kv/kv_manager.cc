#include "deepinfer/kv/kv_manager.h"

#include <algorithm>
#include <string>

namespace deepinfer::kv {

StatusOr<KvManager> KvManager::create(const KvGeometry& g, int64_t memory_budget_bytes) {
  if (g.page_tokens <= 0)
    return invalid_argument("kv: page_tokens must be positive, got " +
                            std::to_string(g.page_tokens));
  if (g.page_bytes <= 0)
    return invalid_argument("kv: the model has no growing KV state to page (page_bytes is 0)");
  // At least what the bytes need, so a hand-built geometry can't undercount; a runtime whose row
  // packing pads pages asks for more through constant_pages_per_seq.
  const int64_t constant_pages = std::max(
      (g.constant_bytes_per_seq + g.page_bytes - 1) / g.page_bytes, g.constant_pages_per_seq);
  const int64_t num_pages =
      std::min(memory_budget_bytes < 0 ? 0 : memory_budget_bytes / g.page_bytes, kMaxPages);
  if (num_pages < constant_pages + 1) {
    return invalid_argument("--kv-memory " + std::to_string(memory_budget_bytes) +
                            " bytes can't hold one sequence: it needs " +
                            std::to_string((constant_pages + 1) * g.page_bytes) + " bytes (" +
                            std::to_string(constant_pages) +
                            " pages of constant state + 1 page of " +
                            std::to_string(g.page_tokens) + " tokens, " +
                            std::to_string(g.page_bytes) + " bytes each)");
  }
  KvManager m(g, num_pages);
  m.constant_pages_ = constant_pages;
  return m;
}

KvCapacity KvManager::capacity() const {
  KvCapacity c;
  c.num_pages = num_total_pages();
  c.max_tokens = (c.num_pages - constant_pages_) * geometry_.page_tokens;
  c.max_sequences = c.num_pages / (constant_pages_ + 1);
  return c;
}

int64_t KvManager::pages_needed(int64_t current_tokens, int64_t total_tokens, bool new_seq) const {
  const int64_t grow = std::max<int64_t>(
      0, geometry_.pages_for_tokens(total_tokens) - geometry_.pages_for_tokens(current_tokens));
  return grow + (new_seq ? constant_pages_ : 0);
}

int64_t KvManager::reserved_tokens(uint64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return 0;
  return static_cast<int64_t>(it->second.table.size()) * geometry_.page_tokens;
}

bool KvManager::reserve(uint64_t seq_id, int64_t total_tokens) {
  auto it = seqs_.find(seq_id);
  const bool new_seq = it == seqs_.end();
  const int64_t have = new_seq ? 0 : static_cast<int64_t>(it->second.table.size());
  const int64_t grow = std::max<int64_t>(0, geometry_.pages_for_tokens(total_tokens) - have);
  const int64_t need = grow + (new_seq ? constant_pages_ : 0);
  // Checked up front so a failure leaves the pool untouched.
  if (need > pool_.num_free()) return false;
  if (new_seq) {
    it = seqs_.emplace(seq_id, SeqPages{}).first;
    it->second.state.reserve(static_cast<size_t>(constant_pages_));
    for (int64_t i = 0; i < constant_pages_; ++i) it->second.state.push_back(*pool_.allocate());
  }
  for (int64_t i = 0; i < grow; ++i) it->second.table.push_back(*pool_.allocate());
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

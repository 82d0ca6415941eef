// EarleyMatcher::compact_state_key: state keys with each older set's part interned
// (continuation_ids.h). The future of the matcher is the union, over the current set's
// unfinished items with an older origin, of the item's remaining elements followed by its
// continuation: what completing its rule back into its origin set leads to (items predicted
// in the current set are the closure of those, so they add nothing). A continuation (j, r) is
// encoded as the items of set j waiting on r, each with its position and its own
// continuation, breadth first from r; items predicted in j itself refer to j's rules by visit
// order (left recursion makes cycles there), older ones by id. Positions are canonical: a
// position and its representative have suffixes (and, for an item waiting on a rule, suffixes
// after that rule) that no string of max_lookahead() + 1 bytes tells apart, followed by any
// continuation. By induction on j, equal ids mean continuations that agree on every string
// that long (as prefixes and as complete sentences), so equal keys mean such futures.
#include <algorithm>

#include "deepinfer/grammar/earley_matcher.h"

namespace deepinfer::grammar {
namespace {

constexpr uint32_t kSep = 0xFFFFFFFF;    // starts a rule of the continuation's set
constexpr uint32_t kLeo = 0xFFFFFFFE;    // a deterministic chain, named by its top item
constexpr uint32_t kSelf = 0xFFFFFFFD;   // key item predicted in the current set
constexpr uint32_t kLocal = 0x80000000;  // | visit index: a rule of the same set
constexpr size_t kMaxMemo = size_t{1} << 18;

}  // namespace

bool EarleyMatcher::memo_get(uint32_t j, uint32_t r, uint32_t* id) const {
  const auto& memo = set_id_[j] == 0 ? cont_tmp_ : cont_memo_;
  const uint64_t key = set_id_[j] == 0 ? (uint64_t{j} << 32 | r) : (uint64_t{set_id_[j]} << 32 | r);
  auto it = memo.find(key);
  if (it == memo.end()) return false;
  *id = it->second;
  return true;
}

void EarleyMatcher::memo_put(uint32_t j, uint32_t r, uint32_t id) const {
  if (set_id_[j] == 0) {
    cont_tmp_[uint64_t{j} << 32 | r] = id;
  } else {
    cont_memo_[uint64_t{set_id_[j]} << 32 | r] = id;
  }
}

bool EarleyMatcher::continuation_id(uint32_t j0, uint32_t r0, ContinuationIds* ids,
                                    uint32_t* id) const {
  if (memo_get(j0, r0, id)) return true;
  const auto& pos = g_->positions_;
  // Depth first: a continuation is encoded once every older one it refers to has an id
  // (origins only get older, so this ends); a task whose references are missing is put back
  // under them and encoded again afterwards.
  cont_stack_.clear();
  cont_stack_.emplace_back(j0, r0);
  while (!cont_stack_.empty()) {
    const auto [j, r] = cont_stack_.back();
    uint32_t done;
    if (memo_get(j, r, &done)) {
      cont_stack_.pop_back();
      continue;
    }
    const size_t pending = cont_stack_.size();
    cont_local_.assign(1, r);
    cont_buf_.clear();
    auto ref = [&](uint32_t origin, uint32_t rule) {
      if (origin == j) {
        auto it = std::find(cont_local_.begin(), cont_local_.end(), rule);
        const uint32_t idx = static_cast<uint32_t>(it - cont_local_.begin());
        if (it == cont_local_.end()) cont_local_.push_back(rule);
        cont_buf_.push_back(kLocal | idx);
        return;
      }
      uint32_t older;
      if (memo_get(origin, rule, &older)) {
        cont_buf_.push_back(older);
      } else {
        cont_buf_.push_back(0);  // encoded again once it has an id
        cont_stack_.emplace_back(origin, rule);
      }
    };
    for (size_t q = 0; q < cont_local_.size(); ++q) {
      if (!spend(1)) return false;
      const uint32_t rule = cont_local_[q];
      cont_buf_.push_back(kSep);
      Item top;
      if (leo_ && leo_top(j, rule, &top)) {
        cont_buf_.push_back(kLeo);
        cont_buf_.push_back(g_->canon_[top.position]);
        ref(top.origin, pos[top.position].rule);
        continue;
      }
      spend(set_begin_[j + 1] - set_begin_[j]);
      for (uint32_t i = set_begin_[j]; i < set_begin_[j + 1]; ++i) {
        const Item& it = items_[i];
        const auto& p = pos[it.position];
        if (p.index != rule || p.kind != Element::Kind::kRule) continue;
        cont_buf_.push_back(g_->canon_[it.position]);
        ref(it.origin, p.rule);
      }
    }
    if (cont_stack_.size() != pending) continue;  // older ones first
    memo_put(j, r, ids->intern(cont_buf_));
    spend(cont_buf_.size());
    cont_stack_.pop_back();
  }
  return memo_get(j0, r0, id);
}

void EarleyMatcher::compact_state_key(std::vector<uint32_t>* out, ContinuationIds* ids) const {
  if (cont_generation_ != ids->generation() || cont_memo_.size() > kMaxMemo) {
    cont_memo_.clear();
    cont_generation_ = ids->generation();
  }
  cont_tmp_.clear();
  const auto& pos = g_->positions_;
  const uint32_t k = static_cast<uint32_t>(set_begin_.size() - 1);
  spend(items_.size() - set_begin_.back());
  for (uint32_t i = set_begin_.back(); i < items_.size(); ++i) {
    const Item& it = items_[i];
    const auto& p = pos[it.position];
    // Finished items are never consulted again, except the accept item (can terminate).
    if (p.index == CompiledGrammar::kEnd && it.position != g_->accept_position_) continue;
    if (it.origin == k) continue;  // predicted here: follows from the items below
    uint32_t id;
    if (!continuation_id(it.origin, p.rule, ids, &id)) return;
    out->push_back(g_->canon_[it.position]);
    out->push_back(id);
  }
}

}  // namespace deepinfer::grammar

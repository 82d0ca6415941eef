#include "deepinfer/grammar/earley_matcher.h"

#include <algorithm>

#include "deepinfer/base/check.h"

namespace deepinfer::grammar {

CompiledGrammar::CompiledGrammar(Grammar g, uint32_t max_lookahead)
    : grammar_(std::move(g)), classes_(grammar_.byte_sets), max_lookahead_(max_lookahead) {
  DI_CHECK(max_lookahead >= 1 && max_lookahead <= kMaxLookahead);
  start_rule_ = static_cast<uint32_t>(grammar_.rules.size());
  grammar_.rules.push_back(Rule{"<start>", {Sequence{{Element::Kind::kRule, grammar_.root}}}});
  rule_starts_.resize(grammar_.rules.size());
  for (uint32_t r = 0; r < grammar_.rules.size(); ++r) {
    for (const Sequence& seq : grammar_.rules[r].alternatives) {
      rule_starts_[r].push_back(static_cast<uint32_t>(positions_.size()));
      for (const Element& e : seq) positions_.push_back({r, e.kind, e.index});
      positions_.push_back({r, Element::Kind::kBytes, kEnd});
    }
  }
  accept_position_ = rule_starts_[start_rule_][0] + 1;
  compute_canonical_positions();
  find_char_rules();
  // Nullable fixpoint.
  nullable_.assign(grammar_.rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < grammar_.rules.size(); ++r) {
      if (nullable_[r]) continue;
      for (const Sequence& seq : grammar_.rules[r].alternatives) {
        bool all = true;
        for (const Element& e : seq) {
          if (e.kind == Element::Kind::kBytes || !nullable_[e.index]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable_[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
}

EarleyMatcher::EarleyMatcher(std::shared_ptr<const CompiledGrammar> g, bool leo,
                             uint64_t work_limit)
    : g_(std::move(g)), leo_(leo) {
  head_.assign(g_->positions_.size(), 0);
  stamp_.assign(g_->positions_.size(), 0);
  start_work(work_limit);
  reset();
}

void EarleyMatcher::reset() {
  items_.clear();
  next_same_.clear();
  set_begin_.assign(1, 0);
  begin_set();
  set_id_.assign(1, epoch_);
  add(g_->rule_starts_[g_->start_rule_][0], 0);
  initial_set_incomplete_ = !close_current_set();
}

void EarleyMatcher::start_work(uint64_t limit) {
  work_ = 0;
  work_limit_ = limit;
  out_of_work_ = initial_set_incomplete_;
}

void EarleyMatcher::begin_set() {
  if (++epoch_ == 0) {  // wrapped: old stamps and set ids could alias new ones
    std::fill(stamp_.begin(), stamp_.end(), 0);
    epoch_ = 1;
    for (auto& id : set_id_) id = 0;
    leo_memo_.clear();
    cont_memo_.clear();  // keyed by set ids too
  }
}

void EarleyMatcher::add(uint32_t position, uint32_t origin) {
  constexpr uint32_t kNone = 0xFFFFFFFF;
  uint32_t head = kNone;
  uint64_t probes = 1;
  if (stamp_[position] == epoch_) {
    head = head_[position];
    for (uint32_t i = head; i != kNone; i = next_same_[i], ++probes) {
      if (items_[i].origin == origin) {
        spend(probes);
        return;
      }
    }
  }
  spend(probes);
  stamp_[position] = epoch_;
  head_[position] = static_cast<uint32_t>(items_.size());
  next_same_.push_back(head);
  items_.push_back({position, origin});
}

bool EarleyMatcher::close_current_set() {
  const uint32_t k = static_cast<uint32_t>(set_begin_.size() - 1);
  const auto& pos = g_->positions_;
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    // One completion scans its whole origin set, so checking once per item overshoots the
    // budget by at most one set.
    if (!spend(1)) return false;
    Item it = items_[i];
    const auto& p = pos[it.position];
    if (p.index == CompiledGrammar::kEnd) {
      Item top;
      if (leo_ && it.origin < k && leo_top(it.origin, p.rule, &top)) {
        add(top.position, top.origin);
        continue;
      }
      // Complete: advance every item in the origin set waiting on this rule.
      uint32_t begin = set_begin_[it.origin];
      uint32_t end =
          it.origin == k ? static_cast<uint32_t>(items_.size()) : set_begin_[it.origin + 1];
      for (uint32_t j = begin; j < end; ++j) {
        const auto& q = pos[items_[j].position];
        if (q.index == p.rule && q.kind == Element::Kind::kRule) {
          add(items_[j].position + 1, items_[j].origin);
        }
        if (it.origin == k) end = static_cast<uint32_t>(items_.size());
      }
      spend(end - begin);
    } else if (p.kind == Element::Kind::kRule) {
      for (uint32_t s : g_->rule_starts_[p.index]) add(s, k);
      if (g_->nullable_[p.index]) add(it.position + 1, it.origin);
    }
  }
  return !out_of_work_;
}

bool EarleyMatcher::leo_top(uint32_t j, uint32_t rule, Item* top) const {
  constexpr uint64_t kNoLeo = ~uint64_t{0}, kInProgress = kNoLeo - 1;
  if (set_id_[j] == 0) return false;  // ids were reset by an epoch wrap
  const uint64_t key = (uint64_t{set_id_[j]} << 32) | rule;
  auto found = leo_memo_.find(key);
  if (found != leo_memo_.end()) {
    if (found->second >= kInProgress) return false;
    *top = {static_cast<uint32_t>(found->second >> 32), static_cast<uint32_t>(found->second)};
    return true;
  }
  if (leo_memo_.size() > (1u << 16)) leo_memo_.clear();
  const auto& pos = g_->positions_;
  const uint32_t end = set_begin_[j + 1];
  uint32_t waiting = 0, w = 0, i = set_begin_[j];
  for (; i < end && waiting < 2; ++i) {
    const auto& q = pos[items_[i].position];
    if (q.index == rule && q.kind == Element::Kind::kRule) {
      ++waiting;
      w = i;
    }
  }
  spend(i - set_begin_[j] + 1);
  uint64_t result = kNoLeo;
  if (waiting == 1 && pos[items_[w].position + 1].index == CompiledGrammar::kEnd) {
    leo_memo_[key] = kInProgress;  // a cycle of unit rules must not recurse forever
    Item cand{items_[w].position + 1, items_[w].origin};
    Item up;
    if (leo_top(cand.origin, pos[items_[w].position].rule, &up)) cand = up;
    result = (uint64_t{cand.position} << 32) | cand.origin;
  }
  leo_memo_[key] = result;
  if (result == kNoLeo) return false;
  *top = {static_cast<uint32_t>(result >> 32), static_cast<uint32_t>(result)};
  return true;
}

bool EarleyMatcher::accept_byte(uint8_t b) {
  if (out_of_work_) return false;
  const auto& pos = g_->positions_;
  const auto& sets = g_->grammar_.byte_sets;
  uint32_t begin = set_begin_.back();
  uint32_t end = static_cast<uint32_t>(items_.size());
  set_begin_.push_back(end);
  begin_set();
  set_id_.push_back(epoch_);
  for (uint32_t i = begin; i < end; ++i) {
    const auto& p = pos[items_[i].position];
    if (p.index != CompiledGrammar::kEnd && p.kind == Element::Kind::kBytes &&
        sets[p.index].test(b)) {
      add(items_[i].position + 1, items_[i].origin);
    }
  }
  spend(end - begin);
  // Out of work part-way: the new set is dropped whole, so the matcher is as before the byte.
  if (items_.size() == end || !close_current_set()) {
    items_.resize(end);
    next_same_.resize(end);
    set_begin_.pop_back();
    set_id_.pop_back();
    return false;  // the epoch moved on, so no stale stamp refers to the popped set
  }
  return true;
}

bool EarleyMatcher::accept_bytes(std::string_view bytes) {
  size_t n = 0;
  for (unsigned char c : bytes) {
    if (!accept_byte(c)) {
      rollback_bytes(n);
      return false;
    }
    ++n;
  }
  return true;
}

bool EarleyMatcher::can_terminate() const {
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    if (items_[i].position == g_->accept_position_ && items_[i].origin == 0) return true;
  }
  return false;
}

ByteSet EarleyMatcher::allowed_bytes() const {
  ByteSet out;
  const auto& pos = g_->positions_;
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    const auto& p = pos[items_[i].position];
    if (p.index != CompiledGrammar::kEnd && p.kind == Element::Kind::kBytes) {
      out |= g_->grammar_.byte_sets[p.index];
    }
  }
  return out;
}

void EarleyMatcher::scanned_sets(std::vector<uint32_t>* out) const {
  const auto& pos = g_->positions_;
  const size_t first = out->size();
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    const auto& p = pos[items_[i].position];
    if (p.index != CompiledGrammar::kEnd && p.kind == Element::Kind::kBytes)
      out->push_back(p.index);
  }
  std::sort(out->begin() + first, out->end());
  out->erase(std::unique(out->begin() + first, out->end()), out->end());
}

void EarleyMatcher::rollback_bytes(size_t n) {
  DI_CHECK(n <= num_bytes());
  if (n == 0) return;
  size_t k = set_begin_.size() - n;
  items_.resize(set_begin_[k]);
  next_same_.resize(set_begin_[k]);
  set_begin_.resize(k);
  set_id_.resize(k);
}

void EarleyMatcher::state_key(std::vector<uint32_t>* out) const {
  const auto& pos = g_->positions_;
  const uint32_t k = static_cast<uint32_t>(set_begin_.size() - 1);
  // key_canon_[s] is valid while key_stamp_[s] == key_gen_ (no clearing per call).
  if (key_canon_.size() < set_begin_.size()) {
    key_canon_.resize(set_begin_.size());
    key_stamp_.resize(set_begin_.size(), 0);
    key_pair_head_.resize(set_begin_.size());
    key_pair_stamp_.resize(set_begin_.size(), 0);
  }
  if (++key_gen_ == 0) {
    std::fill(key_stamp_.begin(), key_stamp_.end(), 0);
    std::fill(key_pair_stamp_.begin(), key_pair_stamp_.end(), 0);
    key_gen_ = 1;
  }
  uint32_t next_canon = 0;
  auto canon = [&](uint32_t set) {
    if (key_stamp_[set] != key_gen_) {
      key_stamp_[set] = key_gen_;
      key_canon_[set] = static_cast<int32_t>(next_canon++);
    }
    return static_cast<uint32_t>(key_canon_[set]);
  };
  // An older set j matters only through the items that wait on a rule r some live item can
  // still complete from j: (j, r) pairs, found breadth-first from the current set's items.
  // Dedup: the pairs of one set are chained (key_pair_next_) from key_pair_head_[set], so a
  // deep nest of repetitions (thousands of pairs) stays linear, not quadratic.
  key_pairs_.clear();
  key_pair_next_.clear();
  constexpr uint32_t kNone = 0xFFFFFFFF;
  auto need = [&](uint32_t set, uint32_t rule) {
    if (set == k) return;  // the current set is in the key whole
    if (key_pair_stamp_[set] != key_gen_) {
      key_pair_stamp_[set] = key_gen_;
      key_pair_head_[set] = kNone;
    }
    for (uint32_t q = key_pair_head_[set]; q != kNone; q = key_pair_next_[q]) {
      if (key_pairs_[q].second == rule) return;
    }
    key_pair_next_.push_back(key_pair_head_[set]);
    key_pair_head_[set] = static_cast<uint32_t>(key_pairs_.size());
    key_pairs_.emplace_back(set, rule);
  };
  canon(k);
  for (uint32_t i = set_begin_.back(); i < items_.size(); ++i) {
    const Item& it = items_[i];
    const auto& p = pos[it.position];
    // Finished items are never consulted again, except the accept item (can terminate).
    if (p.index == CompiledGrammar::kEnd && it.position != g_->accept_position_) continue;
    out->push_back(it.position);
    out->push_back(canon(it.origin));
    need(it.origin, p.rule);
  }
  spend(items_.size() - set_begin_.back());
  for (size_t q = 0; q < key_pairs_.size(); ++q) {
    // Out of work: the key is incomplete and the caller must not use it.
    if (!spend(1)) return;
    const auto [set, rule] = key_pairs_[q];
    out->push_back(0xFFFFFFFF);  // pair separator
    out->push_back(canon(set));
    out->push_back(rule);
    // A deterministic chain (Leo) acts only through its top: completing `rule` from `set`
    // completes exactly that item, the chain's inner items are finished and never consulted.
    // Naming the top instead of the chain keeps the key of a deep right-nested repetition
    // (maxLength: 5000) short instead of one pair per character.
    Item top;
    if (leo_top(set, rule, &top)) {
      out->push_back(0xFFFFFFFE);  // Leo marker
      out->push_back(top.position);
      out->push_back(canon(top.origin));
      need(top.origin, pos[top.position].rule);
      continue;
    }
    spend(set_begin_[set + 1] - set_begin_[set]);
    for (uint32_t i = set_begin_[set]; i < set_begin_[set + 1]; ++i) {
      const Item& it = items_[i];
      const auto& p = pos[it.position];
      if (p.index != rule || p.kind != Element::Kind::kRule) continue;
      out->push_back(it.position);
      out->push_back(canon(it.origin));
      need(it.origin, p.rule);
    }
  }
}

}  // namespace deepinfer::grammar

#include "deepinfer/grammar/earley_matcher.h"

#include <algorithm>

#include "deepinfer/base/check.h"

namespace deepinfer::grammar {

CompiledGrammar::CompiledGrammar(Grammar g) : grammar_(std::move(g)) {
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

EarleyMatcher::EarleyMatcher(std::shared_ptr<const CompiledGrammar> g) : g_(std::move(g)) {
  head_.assign(g_->positions_.size(), 0);
  stamp_.assign(g_->positions_.size(), 0);
  reset();
}

void EarleyMatcher::reset() {
  items_.clear();
  next_same_.clear();
  set_begin_.assign(1, 0);
  begin_set();
  add(g_->rule_starts_[g_->start_rule_][0], 0);
  close_current_set();
}

void EarleyMatcher::begin_set() {
  if (++epoch_ == 0) {  // wrapped: old stamps could alias the new epoch
    std::fill(stamp_.begin(), stamp_.end(), 0);
    epoch_ = 1;
  }
}

void EarleyMatcher::add(uint32_t position, uint32_t origin) {
  constexpr uint32_t kNone = 0xFFFFFFFF;
  uint32_t head = kNone;
  if (stamp_[position] == epoch_) {
    head = head_[position];
    for (uint32_t i = head; i != kNone; i = next_same_[i]) {
      if (items_[i].origin == origin) return;
    }
  }
  stamp_[position] = epoch_;
  head_[position] = static_cast<uint32_t>(items_.size());
  next_same_.push_back(head);
  items_.push_back({position, origin});
}

void EarleyMatcher::close_current_set() {
  const uint32_t k = static_cast<uint32_t>(set_begin_.size() - 1);
  const auto& pos = g_->positions_;
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    Item it = items_[i];
    const auto& p = pos[it.position];
    if (p.index == CompiledGrammar::kEnd) {
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
    } else if (p.kind == Element::Kind::kRule) {
      for (uint32_t s : g_->rule_starts_[p.index]) add(s, k);
      if (g_->nullable_[p.index]) add(it.position + 1, it.origin);
    }
  }
}

bool EarleyMatcher::accept_byte(uint8_t b) {
  const auto& pos = g_->positions_;
  const auto& sets = g_->grammar_.byte_sets;
  uint32_t begin = set_begin_.back();
  uint32_t end = static_cast<uint32_t>(items_.size());
  set_begin_.push_back(end);
  begin_set();
  for (uint32_t i = begin; i < end; ++i) {
    const auto& p = pos[items_[i].position];
    if (p.index != CompiledGrammar::kEnd && p.kind == Element::Kind::kBytes &&
        sets[p.index].test(b)) {
      add(items_[i].position + 1, items_[i].origin);
    }
  }
  if (items_.size() == end) {
    set_begin_.pop_back();
    return false;  // the epoch moved on, so no stale stamp refers to the popped set
  }
  close_current_set();
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

void EarleyMatcher::rollback_bytes(size_t n) {
  DI_CHECK(n <= num_bytes());
  if (n == 0) return;
  size_t k = set_begin_.size() - n;
  items_.resize(set_begin_[k]);
  next_same_.resize(set_begin_[k]);
  set_begin_.resize(k);
}

void EarleyMatcher::local_key(size_t base, const int32_t* path_state,
                              std::vector<uint32_t>* out) const {
  constexpr uint32_t kSelf = 0xFFFFFFFF, kPath = 0x80000000;
  const auto& pos = g_->positions_;
  const uint32_t k = static_cast<uint32_t>(set_begin_.size() - 1);
  for (uint32_t i = set_begin_.back(); i < items_.size(); ++i) {
    const Item& it = items_[i];
    if (pos[it.position].index == CompiledGrammar::kEnd && it.position != g_->accept_position_) {
      continue;  // finished items are never consulted again
    }
    out->push_back(it.position);
    if (it.origin == k) {
      out->push_back(kSelf);
    } else if (it.origin <= base) {
      out->push_back(it.origin);
    } else {
      out->push_back(kPath | static_cast<uint32_t>(path_state[it.origin - base]));
    }
  }
}

void EarleyMatcher::state_key(std::vector<uint32_t>* out) const {
  const auto& pos = g_->positions_;
  const uint32_t k = static_cast<uint32_t>(set_begin_.size() - 1);
  key_canon_.resize(set_begin_.size());
  key_queue_.clear();
  key_queue_.push_back(k);
  key_canon_[k] = 0;
  auto set_end = [&](uint32_t s) {
    return s == k ? static_cast<uint32_t>(items_.size()) : set_begin_[s + 1];
  };
  for (size_t q = 0; q < key_queue_.size(); ++q) {
    uint32_t s = key_queue_[q];
    out->push_back(0xFFFFFFFF);  // set separator
    for (uint32_t i = set_begin_[s]; i < set_end(s); ++i) {
      const Item& it = items_[i];
      const auto& p = pos[it.position];
      // Older sets matter only through items waiting on a rule (completion advances those);
      // the current set also scans, and its finished accept item says "can terminate".
      bool keep = s == k ? (p.index != CompiledGrammar::kEnd || it.position == g_->accept_position_)
                         : (p.index != CompiledGrammar::kEnd && p.kind == Element::Kind::kRule);
      if (!keep) continue;
      bool seen = false;
      for (uint32_t v : key_queue_) seen |= v == it.origin;
      if (!seen) {
        key_canon_[it.origin] = static_cast<int32_t>(key_queue_.size());
        key_queue_.push_back(it.origin);
      }
      out->push_back(it.position);
      out->push_back(static_cast<uint32_t>(key_canon_[it.origin]));
    }
  }
}

}  // namespace deepinfer::grammar

#include "deepinfer/grammar/earley_matcher.h"

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
  reset();
}

void EarleyMatcher::reset() {
  items_.clear();
  set_begin_.assign(1, 0);
  add(g_->rule_starts_[g_->start_rule_][0], 0);
  close_current_set();
}

void EarleyMatcher::add(uint32_t position, uint32_t origin) {
  // Sets are small for the grammars seen so far; a linear scan avoids any allocation.
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    if (items_[i].position == position && items_[i].origin == origin) return;
  }
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
  for (uint32_t i = begin; i < end; ++i) {
    const auto& p = pos[items_[i].position];
    if (p.index != CompiledGrammar::kEnd && p.kind == Element::Kind::kBytes &&
        sets[p.index].test(b)) {
      add(items_[i].position + 1, items_[i].origin);
    }
  }
  if (items_.size() == end) {
    set_begin_.pop_back();
    return false;
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
  set_begin_.resize(k);
}

}  // namespace deepinfer::grammar

#include "deepinfer/grammar/language_product.h"

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "deepinfer/base/check.h"
#include "deepinfer/grammar/earley_matcher.h"

namespace deepinfer::grammar {
namespace {

struct State {
  std::map<uint32_t, ByteSet> out;  // next state -> the bytes that lead there
  bool accepting = false;
};

}  // namespace

StatusOr<Grammar> intersect_languages(const std::vector<LanguageTerm>& terms, size_t max_states) {
  const size_t n = terms.size();
  bool any_positive = false;
  for (const LanguageTerm& t : terms) any_positive = any_positive || !t.negated;
  if (!any_positive) return invalid_argument("language product: every term is negated");
  std::vector<std::shared_ptr<const CompiledGrammar>> compiled;
  std::vector<std::unique_ptr<EarleyMatcher>> m;
  for (const LanguageTerm& t : terms) {
    compiled.push_back(std::make_shared<const CompiledGrammar>(t.grammar));
    m.push_back(std::make_unique<EarleyMatcher>(compiled.back()));
  }
  // Bytes in the same class of every term's grammar step every matcher alike.
  std::map<std::vector<uint8_t>, ByteSet> by_signature;
  for (int b = 0; b < 256; ++b) {
    std::vector<uint8_t> sig;
    for (const auto& g : compiled) sig.push_back(g->byte_classes().of(static_cast<uint8_t>(b)));
    by_signature[sig].set(b);
  }
  std::vector<ByteSet> classes;
  std::vector<uint8_t> representative;
  for (const auto& [sig, set] : by_signature) {
    classes.push_back(set);
    for (int b = 0; b < 256; ++b)
      if (set.test(b)) {
        representative.push_back(static_cast<uint8_t>(b));
        break;
      }
  }

  // A negated term that cannot take the next byte never holds again on this path: it is dead
  // from the depth at which it died. A then_anything term whose L took the bytes so far is
  // settled from that depth: a positive one holds whatever follows, a negated one fails
  // whatever follows (the state is a sink). Both are undone when the walk backs up past them.
  std::vector<int64_t> dead_at(n, -1), settled_at(n, -1);
  std::vector<uint32_t> scratch;
  auto key = [&]() {
    std::string k;
    for (size_t i = 0; i < n; ++i) {
      scratch.clear();
      if (dead_at[i] >= 0) {
        scratch.push_back(0xFFFFFFFFu);
      } else if (settled_at[i] >= 0) {
        scratch.push_back(0xFFFFFFFEu);
      } else {
        m[i]->state_key(&scratch);
      }
      const uint32_t len = static_cast<uint32_t>(scratch.size());
      k.append(reinterpret_cast<const char*>(&len), sizeof len);
      k.append(reinterpret_cast<const char*>(scratch.data()), scratch.size() * sizeof(uint32_t));
    }
    return k;
  };
  auto doomed = [&]() {
    for (size_t i = 0; i < n; ++i)
      if (terms[i].negated && settled_at[i] >= 0) return true;
    return false;
  };
  auto accepting = [&]() {
    if (doomed()) return false;
    for (size_t i = 0; i < n; ++i) {
      if (dead_at[i] >= 0 || settled_at[i] >= 0) continue;  // negated dead / positive settled
      if (m[i]->can_terminate() == terms[i].negated) return false;
    }
    return true;
  };
  auto settle = [&](int64_t depth) {
    for (size_t i = 0; i < n; ++i)
      if (terms[i].then_anything && dead_at[i] < 0 && settled_at[i] < 0 && m[i]->can_terminate())
        settled_at[i] = depth;
  };
  std::vector<State> states;
  std::unordered_map<std::string, uint32_t> ids;
  auto intern = [&](bool* fresh) -> uint32_t {
    auto [it, inserted] = ids.emplace(key(), static_cast<uint32_t>(states.size()));
    *fresh = inserted;
    if (inserted) states.push_back(State{{}, accepting()});
    return it->second;
  };
  auto undo = [&](int64_t depth) {  // takes back the byte that led to `depth`
    for (size_t i = 0; i < n; ++i) {
      if (dead_at[i] == depth) {
        dead_at[i] = -1;  // it never took that byte
      } else if (dead_at[i] < 0 && settled_at[i] < 0) {
        m[i]->rollback_bytes(1);
      } else if (dead_at[i] < 0 && settled_at[i] == depth) {
        settled_at[i] = -1;
        m[i]->rollback_bytes(1);
      }
    }
  };

  struct Frame {
    uint32_t state;
    size_t next_class;
    ByteSet allowed;  // bytes every unsettled positive term takes here
  };
  auto allowed_here = [&]() {
    ByteSet a;
    if (doomed()) return a;
    a.set();
    for (size_t i = 0; i < n; ++i)
      if (!terms[i].negated && settled_at[i] < 0) a &= m[i]->allowed_bytes();
    return a;
  };
  bool fresh = false;
  settle(0);
  std::vector<Frame> stack;
  stack.push_back({intern(&fresh), 0, allowed_here()});
  while (!stack.empty()) {
    Frame& f = stack.back();
    const int64_t depth = static_cast<int64_t>(stack.size()) - 1;
    if (f.next_class == classes.size()) {
      stack.pop_back();
      if (!stack.empty()) undo(depth);
      continue;
    }
    const size_t c = f.next_class++;
    const uint8_t b = representative[c];
    if (!f.allowed.test(b)) continue;
    for (size_t i = 0; i < n; ++i) {
      if (dead_at[i] >= 0 || settled_at[i] >= 0) continue;
      if (!m[i]->accept_byte(b)) {
        DI_CHECK(terms[i].negated);  // unsettled positive terms allow b
        dead_at[i] = depth + 1;
      }
    }
    settle(depth + 1);
    const uint32_t from = f.state;  // f may move when the stack grows
    const uint32_t to = intern(&fresh);
    states[from].out[to] |= classes[c];
    if (states.size() > max_states)
      return unimplemented("the product of the string's constraints has over " +
                           std::to_string(max_states) + " states");
    if (fresh) {
      stack.push_back({to, 0, allowed_here()});
    } else {
      undo(depth + 1);
    }
  }

  // Only states that can still reach an accepting one become rules.
  std::vector<bool> live(states.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t s = 0; s < states.size(); ++s) {
      if (live[s]) continue;
      bool reaches = states[s].accepting;
      for (const auto& [to, set] : states[s].out) reaches = reaches || live[to];
      if (reaches) live[s] = changed = true;
    }
  }
  if (!live[0]) return invalid_argument("the string's constraints together: accepts no value");
  Grammar g;
  std::vector<uint32_t> rule_of(states.size(), 0);
  for (size_t s = 0; s < states.size(); ++s) {
    if (!live[s]) continue;
    rule_of[s] = static_cast<uint32_t>(g.rules.size());
    g.rules.push_back(Rule{"product" + std::to_string(s), {}});
  }
  std::map<std::string, uint32_t> set_ids;
  for (size_t s = 0; s < states.size(); ++s) {
    if (!live[s]) continue;
    Rule& r = g.rules[rule_of[s]];
    for (const auto& [to, set] : states[s].out) {
      if (!live[to]) continue;
      auto [it, inserted] =
          set_ids.emplace(set.to_string(), static_cast<uint32_t>(g.byte_sets.size()));
      if (inserted) g.byte_sets.push_back(set);
      r.alternatives.push_back(Sequence{Element{Element::Kind::kBytes, it->second},
                                        Element{Element::Kind::kRule, rule_of[to]}});
    }
    if (states[s].accepting) r.alternatives.push_back(Sequence{});
  }
  g.root = rule_of[0];
  return g;
}

}  // namespace deepinfer::grammar

// CompiledGrammar::compute_canonical_positions: positions that no token can tell apart. A
// matcher deep inside a long counted string (minLength 3000, maxLength 10000) is at a new
// position after every character, so without this every mask there is a new state and a full
// vocabulary walk; with it, all positions with more than a token's length of room left share
// one key, one DFA state and one cached mask.
//
// With L = max_lookahead() (at most kMaxLookahead) and M = L + 2, two suffixes S and S' are
// equivalent when for every continuation C the strings of at most L + 1 bytes that are prefixes (or
// sentences) of S C and S' C agree. Shapes recognized (both as the builders lower counts):
// - a run of one element x repeated r >= M times inside an alternative: x^r R and x^M R agree,
//   since such a string consumes at most L + 1 copies of x (each non-empty one takes a byte).
//   An item waiting on x sees the suffix after it, x^(r-1) R, hence M and not M - 1.
// - a chain of nested optionals T_D ::= "" | x T_(D-1), T_1 ::= "" | x, deriving x{0,D}:
//   T_D and T_M agree for D >= M, position by position (also after x, T_(D-1) and T_(M-1)).
#include <algorithm>
#include <numeric>

#include "deepinfer/grammar/earley_matcher.h"

namespace deepinfer::grammar {

void CompiledGrammar::compute_canonical_positions() {
  const uint32_t M = max_lookahead_ + 2;
  canon_.resize(positions_.size());
  std::iota(canon_.begin(), canon_.end(), 0u);
  const auto& rules = grammar_.rules;
  // Runs.
  std::vector<uint32_t> run;
  for (uint32_t r = 0; r < rules.size(); ++r) {
    for (size_t a = 0; a < rules[r].alternatives.size(); ++a) {
      const Sequence& seq = rules[r].alternatives[a];
      if (seq.size() < M) continue;
      run.assign(seq.size(), 1);
      for (size_t d = seq.size() - 1; d-- > 0;) {
        if (seq[d] == seq[d + 1]) run[d] = run[d + 1] + 1;
      }
      const uint32_t start = rule_starts_[r][a];
      for (size_t d = 0; d < seq.size(); ++d) {
        if (run[d] >= M) canon_[start + d] = static_cast<uint32_t>(start + d + run[d] - M);
      }
    }
  }
  // Chains: depth[r] = D for T_D (0: not a chain rule), rep[r] = T_M of its chain.
  constexpr uint32_t kNone = 0xFFFFFFFF;
  const uint32_t n = static_cast<uint32_t>(rules.size());
  auto shape = [&](uint32_t r, Element* x, uint32_t* next) {
    const auto& alts = rules[r].alternatives;
    if (alts.size() != 2 || !alts[0].empty()) return false;
    const Sequence& s = alts[1];
    if (s.size() == 1) {
      *x = s[0];
      *next = kNone;
      return true;
    }
    if (s.size() != 2 || s[1].kind != Element::Kind::kRule || s[1].index == r) return false;
    *x = s[0];
    *next = s[1].index;
    return true;
  };
  enum : uint8_t { kUnknown, kOnPath, kChain, kNoChain };
  std::vector<uint8_t> state(n, kUnknown);
  std::vector<uint32_t> depth(n, 0), rep(n, kNone), path;
  for (uint32_t r0 = 0; r0 < n; ++r0) {
    if (state[r0] != kUnknown) continue;
    // Down the chain to its end or to a rule already numbered, then number it upwards.
    Element x0{};
    uint32_t r = r0, next = kNone;
    path.clear();
    while (r != kNone && state[r] == kUnknown) {
      Element xr;
      if (!shape(r, &xr, &next) || (!path.empty() && !(xr == x0))) break;
      if (path.empty()) x0 = xr;
      state[r] = kOnPath;
      path.push_back(r);
      r = next;
    }
    uint32_t below = 0, below_rep = kNone;
    bool chain = r == kNone && !path.empty();  // ended on T_1
    if (r != kNone && state[r] == kChain) {
      Element xr;
      chain = shape(r, &xr, &next) && xr == x0;
      below = depth[r];
      below_rep = rep[r];
    }
    if (path.empty()) state[r0] = kNoChain;
    for (size_t i = path.size(); i-- > 0;) {
      const uint32_t p = path[i];
      if (!chain) {
        state[p] = kNoChain;
        continue;
      }
      state[p] = kChain;
      depth[p] = ++below;
      rep[p] = depth[p] == M ? p : depth[p] > M ? below_rep : kNone;
      below_rep = rep[p];
    }
  }
  for (uint32_t r = 0; r < n; ++r) {
    if (depth[r] <= M || rep[r] == kNone) continue;
    const uint32_t c = rep[r];
    for (size_t a = 0; a < 2; ++a) {
      const size_t len = rules[r].alternatives[a].size();
      for (size_t d = 0; d <= len; ++d) canon_[rule_starts_[r][a] + d] = rule_starts_[c][a] + d;
    }
  }
}

}  // namespace deepinfer::grammar

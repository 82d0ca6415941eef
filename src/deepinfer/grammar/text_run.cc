// The mask fast path's proof (grammar_matcher.h, TextRun): which text tokens are accepted from
// a state as a whole, found on the lazy DFA before the vocabulary walk. Inside a JSON string,
// a free-text regex or an EBNF text rule, nearly the whole vocabulary is such tokens, and the
// walk then only visits the few that close the string, escape, or are cut mid-character.
#include <algorithm>

#include "deepinfer/base/check.h"
#include "deepinfer/grammar/grammar_matcher.h"

namespace deepinfer::grammar {
namespace {

// Fewer ASCII bytes than this in a run (and no Unicode) is not worth the bitset work.
constexpr int kMinRunBytes = 8;

}  // namespace

void GrammarMatcher::hold_at_most(size_t depth) {
  if (held_ > depth) {
    bytes_.rollback_bytes(held_ - depth);
    held_ = depth;
  }
}

void GrammarMatcher::probe_set(size_t depth, uint8_t b) {
  hold_at_most(depth);
  if (probe_.size() <= depth) probe_.resize(depth + 1);
  probe_[depth] = b;
}

bool GrammarMatcher::hold_exactly(size_t depth) {
  hold_at_most(depth);
  for (; held_ < depth; ++held_) {
    bool ok = bytes_.accept_byte(probe_[held_]);
    if (!ok && bytes_.out_of_work()) return false;  // the caller discards the mask
    DI_CHECK(ok);                                   // the probe path is made of live transitions
  }
  return true;
}

int32_t GrammarMatcher::probe_step(int32_t state, size_t depth, uint8_t b) {
  const int32_t known = cache_->dfa().next(state, b);
  if (known != ByteDfa::kUnknown) return known;
  if (!hold_exactly(depth)) return ByteDfa::kDead;
  const int32_t t = earley_step(state, b);
  if (t != ByteDfa::kDead) bytes_.rollback_bytes(1);
  return t;
}

bool GrammarMatcher::multibyte_form_leads_to(const Utf8Form& form, int k, size_t base,
                                             int32_t state, int32_t target) {
  // probe_[0, base + k) leads to `state`.
  const size_t depth = base + k;
  const ByteClasses& classes = grammar_->byte_classes();
  std::array<bool, 256> seen{};
  for (int b = form.ranges[k].first; b <= form.ranges[k].second; ++b) {
    const uint8_t c = classes.of(static_cast<uint8_t>(b));
    if (seen[c]) continue;  // a class's bytes lead to the same state
    seen[c] = true;
    const int32_t next = probe_step(state, depth, static_cast<uint8_t>(b));
    if (next < 0) return false;
    if (k + 1 == form.length) {
      if (next != target) return false;
      continue;
    }
    probe_set(depth, static_cast<uint8_t>(b));
    if (!multibyte_form_leads_to(form, k + 1, base, next, target)) return false;
  }
  return true;
}

bool GrammarMatcher::multibyte_chars_lead_to(size_t depth, int32_t state, int32_t target) {
  for (const Utf8Form& form : multibyte_utf8_forms()) {
    if (!multibyte_form_leads_to(form, 0, depth, state, target)) return false;
  }
  return true;
}

bool GrammarMatcher::run_chars_dead(int32_t state, size_t depth, const TextRun& run,
                                    bool* unicode_dead) {
  *unicode_dead = false;
  for (int b = 0; b < 128; ++b) {
    if (!run.excluded[b] && probe_step(state, depth, static_cast<uint8_t>(b)) != ByteDfa::kDead)
      return false;
  }
  if (run.unicode) {
    // Every multi-byte character starts with one of these; a live lead byte is not proof.
    bool dead = true;
    for (const Utf8Form& form : multibyte_utf8_forms()) {
      for (int b = form.ranges[0].first; b <= form.ranges[0].second && dead; ++b)
        dead = probe_step(state, depth, static_cast<uint8_t>(b)) == ByteDfa::kDead;
    }
    *unicode_dead = dead;
  }
  return !bytes_.out_of_work();
}

bool GrammarMatcher::analyze_run(int32_t state, size_t depth, bool with_unicode,
                                 ByteDfa::RunInfo* info) {
  ByteDfa::RunInfo out;
  if (const ByteDfa::RunInfo* known = cache_->dfa().run_info(state)) {
    *info = *known;
    if (known->unicode_checked || !with_unicode) return true;
    out = *known;
  } else {
    // The state's ASCII transitions; the run is the largest group of bytes sharing a target.
    std::array<int32_t, 128> to;
    for (int b = 0; b < 128; ++b) to[b] = probe_step(state, depth, static_cast<uint8_t>(b));
    if (bytes_.out_of_work()) return false;
    int best = 0;
    for (int b = 0; b < 128; ++b) {
      if (to[b] < 0 || (b > 0 && to[b] == to[b - 1])) continue;
      const int count = static_cast<int>(std::count(to.begin(), to.end(), to[b]));
      if (count > best) best = count, out.target = to[b];
    }
    for (int b = 0; b < 128; ++b)
      if (best == 0 || to[b] != out.target) out.excluded[b / 64] |= uint64_t{1} << (b % 64);
  }
  if (with_unicode) {
    // Read off the Earley set where it can be (char_rules.cc), else probed form by form.
    int b = 0;
    while (b < 128 && ((out.excluded[b / 64] >> (b % 64)) & 1)) ++b;
    out.unicode =
        out.target >= 0 &&
        ((hold_exactly(depth) && bytes_.multibyte_chars_follow(static_cast<uint8_t>(b))) ||
         multibyte_chars_lead_to(depth, state, out.target));
    out.unicode_checked = true;
  }
  if (bytes_.out_of_work()) return false;
  cache_->dfa().set_run_info(state, out);
  *info = out;
  return true;
}

bool GrammarMatcher::find_text_run(int32_t root, TextRun* run) {
  held_ = 0;
  ByteDfa::RunInfo at_root;
  if (!analyze_run(root, 0, /*with_unicode=*/true, &at_root) || at_root.target < 0) {
    hold_at_most(0);
    return false;
  }
  const int32_t target = at_root.target;
  int best = 0;
  uint8_t rep = 0;  // a run byte: the probe path follows the chain through it
  for (int b = 127; b >= 0; --b) {
    run->excluded[b] = (at_root.excluded[b / 64] >> (b % 64)) & 1;
    if (!run->excluded[b]) rep = static_cast<uint8_t>(b), ++best;
  }
  run->unicode = at_root.unicode;
  if (best < kMinRunBytes && !run->unicode) {
    hold_at_most(0);
    return false;
  }
  // Follow the chain root -> target -> ...: each state must send every run byte (and, while
  // unicode holds, every multi-byte character) to one common next state. A token of m
  // characters is then accepted if the first m states of the chain pass (with a non-ASCII
  // character: the first m of the unicode part); a cycle passes for any m.
  std::vector<int32_t> chain = {root};
  int32_t cur = target;
  run->max_chars = run->unicode_chars = -1;
  run->dead_after = run->unicode_dead_after = false;
  bool unicode_open = run->unicode;  // multi-byte characters follow the chain so far
  while (std::find(chain.begin(), chain.end(), cur) == chain.end()) {
    const int d = static_cast<int>(chain.size());
    if (d >= TextTokens::kMaxChars) {
      run->max_chars = TextTokens::kMaxChars;
      if (unicode_open) run->unicode_chars = d;
      break;
    }
    probe_set(chain.size() - 1, rep);
    const size_t depth = chain.size();  // probe_[0, depth) leads to cur
    // Usually the run's bytes are within cur's own largest group (its memoized analysis);
    // otherwise they are checked one by one.
    int32_t next = ByteDfa::kDead;
    bool uniform = false, analysed = false;
    ByteDfa::RunInfo here;
    if (analyze_run(cur, depth, unicode_open, &here) && here.target >= 0) {
      uniform = true;
      for (int w = 0; w < 2; ++w) {
        const uint64_t in_run = ~at_root.excluded[w];
        uniform = uniform && (in_run & here.excluded[w]) == 0;
      }
      next = here.target;
      analysed = uniform;
    }
    if (!uniform && !bytes_.out_of_work()) {
      next = probe_step(cur, depth, rep);
      uniform = next >= 0;
      for (int b = 0; b < 128 && uniform; ++b) {
        if (!run->excluded[b]) uniform = probe_step(cur, depth, static_cast<uint8_t>(b)) == next;
      }
    }
    if (!uniform) {
      run->max_chars = d;
      if (unicode_open) run->unicode_chars = d;
      bool unicode_dead = false;
      run->dead_after = !bytes_.out_of_work() && run_chars_dead(cur, depth, *run, &unicode_dead);
      // Longer tokens with non-ASCII characters are rejected only if those characters were
      // proven to follow the whole chain.
      run->unicode_dead_after = run->dead_after && unicode_open && unicode_dead;
      break;
    }
    if (unicode_open && !(analysed ? here.unicode : multibyte_chars_lead_to(depth, cur, next))) {
      run->unicode_chars = d;  // non-ASCII characters from here on go elsewhere: walked
      unicode_open = false;
    }
    chain.push_back(cur);
    cur = next;
  }
  hold_at_most(0);
  return true;
}

}  // namespace deepinfer::grammar

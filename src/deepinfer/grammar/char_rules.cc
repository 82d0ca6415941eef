// CompiledGrammar::find_char_rules and EarleyMatcher::multibyte_chars_follow: a proof, read
// off the Earley set, that every multi-byte character leads where an ASCII byte does. The
// mask fast path (text_run.cc) otherwise probes each UTF-8 form byte class by byte class, a
// score of new partial-character states per state of a counting string, which was most of
// the cost of a string's first masks.
//
// A char rule reads exactly one character: every alternative starts with a byte set that is
// all ASCII or all >= 0x80; the latter are plain byte-set sequences, each inside one
// well-formed UTF-8 form, and together they cover every form (the JSON string character, a
// regex `.` or `[^...]` of ASCII exclusions, as the builders lower them). If the only items
// of the current set that scan an ASCII byte b or any byte >= 0x80 start alternatives of one
// char rule R, and b is read by a one-byte alternative of R alone, then after b and after any
// multi-byte character c the next set holds R complete from the current set and the same
// parents advanced (Leo included, since both complete R from the same set); the finished
// items differ, but keys and the future hold only unfinished ones, so both lead to one state.
#include <algorithm>

#include "deepinfer/grammar/earley_matcher.h"
#include "deepinfer/grammar/text_tokens.h"

namespace deepinfer::grammar {
namespace {

bool subset(const ByteSet& a, const ByteSet& b) { return (a & ~b).none(); }

ByteSet range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  for (int b = lo; b <= hi; ++b) s.set(b);
  return s;
}

}  // namespace

void CompiledGrammar::find_char_rules() {
  const auto& rules = grammar_.rules;
  const auto& sets = grammar_.byte_sets;
  const ByteSet high = range(0x80, 0xFF);
  char_start_.assign(positions_.size(), 0);
  char_single_.assign(rules.size(), ByteSet());
  set_reads_high_.resize(sets.size());
  for (size_t s = 0; s < sets.size(); ++s) set_reads_high_[s] = (sets[s] & high).any();
  const auto& forms = multibyte_utf8_forms();
  for (uint32_t r = 0; r < rules.size(); ++r) {
    bool ok = true, any_multi = false;
    std::vector<bool> covered(forms.size(), false);
    ByteSet singles, longer_firsts;
    for (const Sequence& alt : rules[r].alternatives) {
      if (alt.empty() || alt[0].kind != Element::Kind::kBytes) {
        ok = false;
        break;
      }
      const ByteSet& first = sets[alt[0].index];
      const bool hi = (first & high).any(), lo = (first & ~high).any();
      if (hi && lo) {
        ok = false;
        break;
      }
      if (lo) {
        (alt.size() == 1 ? singles : longer_firsts) |= first;
        continue;
      }
      any_multi = true;
      if (std::any_of(alt.begin(), alt.end(),
                      [](const Element& e) { return e.kind != Element::Kind::kBytes; })) {
        ok = false;
        break;
      }
      bool inside = false;
      for (size_t f = 0; f < forms.size(); ++f) {
        if (static_cast<size_t>(forms[f].length) != alt.size()) continue;
        bool in = true, covers = true;
        for (size_t k = 0; k < alt.size(); ++k) {
          const ByteSet form_k = range(forms[f].ranges[k].first, forms[f].ranges[k].second);
          in = in && subset(sets[alt[k].index], form_k);
          covers = covers && subset(form_k, sets[alt[k].index]);
        }
        inside = inside || in;
        if (covers) covered[f] = true;
      }
      if (!inside) {
        ok = false;
        break;
      }
    }
    if (!ok || !any_multi || std::find(covered.begin(), covered.end(), false) != covered.end())
      continue;
    char_single_[r] = singles & ~longer_firsts;
    for (uint32_t start : rule_starts_[r]) char_start_[start] = 1;
  }
}

bool EarleyMatcher::multibyte_chars_follow(uint8_t b) const {
  const auto& pos = g_->positions_;
  constexpr uint32_t kNone = 0xFFFFFFFF;
  uint32_t rule = kNone;
  for (size_t i = set_begin_.back(); i < items_.size(); ++i) {
    const auto& p = pos[items_[i].position];
    if (p.index == CompiledGrammar::kEnd || p.kind != Element::Kind::kBytes) continue;
    if (!g_->set_reads_high_[p.index] && !g_->grammar_.byte_sets[p.index].test(b)) continue;
    if (!g_->char_start_[items_[i].position]) return false;
    if (rule != kNone && rule != p.rule) return false;
    rule = p.rule;
  }
  return rule != kNone && g_->char_single_[rule].test(b);
}

}  // namespace deepinfer::grammar

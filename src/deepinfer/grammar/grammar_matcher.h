// Token-level constrained decoding: a per-sequence matcher over a tokenizer's vocabulary.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/grammar/earley_matcher.h"
#include "deepinfer/grammar/mask_cache.h"
#include "deepinfer/grammar/text_tokens.h"

namespace deepinfer::tokenizer {
class Tokenizer;
}

namespace deepinfer::grammar {

// Per-tokenizer preprocessing, shared by every matcher: token byte strings sorted so that
// tokens sharing a prefix are adjacent (an implicit trie), with each one's common-prefix length
// to its predecessor. Special/added tokens and empty tokens are never produced by a grammar.
class TokenizerInfo {
 public:
  static StatusOr<std::shared_ptr<const TokenizerInfo>> from_tokenizer(
      const tokenizer::Tokenizer& tok, std::vector<int32_t> stop_token_ids);
  // For tests and non-HF vocabularies: bytes per id; ids in `stop_token_ids` end a sequence.
  static StatusOr<std::shared_ptr<const TokenizerInfo>> from_vocab(
      std::vector<std::string> token_bytes, std::vector<bool> grammar_token,
      std::vector<int32_t> stop_token_ids);

  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  int32_t mask_words() const { return (vocab_size() + 31) / 32; }
  const std::string& token_bytes(int32_t id) const { return bytes_[id]; }
  bool is_stop(int32_t id) const;
  // The longest grammar token's bytes: what CompiledGrammar's max_lookahead must cover.
  uint32_t max_token_bytes() const { return static_cast<uint32_t>(max_token_bytes_); }

 private:
  friend class GrammarMatcher;
  std::vector<std::string> bytes_;
  std::vector<int32_t> sorted_;  // grammar-usable token ids, by byte string
  std::vector<uint32_t> lcp_;    // lcp_[i] = common prefix of sorted_[i-1] and sorted_[i]
  // skip_[i]: the first j > i with lcp_[j] < lcp_[i]. Every token in between shares at least
  // lcp_[i] bytes with sorted_[i-1], so a rejected prefix is skipped in O(its length) jumps.
  std::vector<uint32_t> skip_;
  size_t max_token_bytes_ = 0;
  // sorted_[i]'s bytes, back to back in walk order.
  std::vector<uint8_t> sorted_bytes_;
  std::vector<uint32_t> sorted_off_;  // sorted_.size() + 1 offsets into sorted_bytes_
  // Common prefix of sorted_[a] and sorted_[b] (a < b) = min lcp_[a+1..b]: a sparse table of
  // range minima, so the fast path's walk can jump over the tokens it already knows.
  size_t common_prefix(size_t a, size_t b) const;
  std::vector<std::vector<uint8_t>> lcp_min_;  // level k: min of lcp_[i .. i + 2^k)
  TextTokens text_;
  TextSelectionCache text_selections_;
  std::array<uint32_t, 256> first_byte_tokens_{};  // grammar tokens starting with each byte
  std::vector<int32_t> stop_ids_;
  std::vector<bool> grammar_token_;
};

class GrammarMatcher {
 public:
  // Masks are memoized in `cache` (exact: keyed by the full matcher state). Matchers of the
  // same grammar and tokenizer may share one cache when they run on one thread; by default
  // each matcher has its own of kDefaultCacheBytes.
  static constexpr size_t kDefaultCacheBytes = 4 << 20;
  // Work budget of one mask, one accepted token and the matcher's start, in Earley item
  // operations (EarleyMatcher::start_work): a deterministic bound (about 1 ns each) on the
  // engine-thread time a grammar can take per step. Corpus grammars need at most 0.3M, the
  // ambiguous 019_xml_like more as its text grows (README.md).
  static constexpr uint64_t kDefaultWorkBudget = uint64_t{1} << 25;
  GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar,
                 std::shared_ptr<const TokenizerInfo> info,
                 std::shared_ptr<MaskCache> cache = nullptr,
                 uint64_t work_budget = kDefaultWorkBudget);

  // False (state unchanged) when the token is not allowed now, or when accepting it ran out of
  // the work budget (work_budget_exceeded()). A stop token is allowed only when the grammar can
  // terminate; accepting it terminates the matcher.
  bool accept_token(int32_t id);
  // mask has info.mask_words() words; bit (id % 32) of word id / 32 is set iff allowed.
  // False when the work budget ran out first: the mask is then all zero (not the answer), the
  // matcher is unchanged and nothing was cached; the caller should give up on the sequence.
  bool fill_next_token_bitmask(uint32_t* mask);
  // The last fill_next_token_bitmask or accept_token stopped on the work budget.
  bool work_budget_exceeded() const { return budget_exceeded_; }
  // Work the last fill_next_token_bitmask or accept_token did (for tests and benchmarks).
  uint64_t last_work() const { return last_work_; }
  // Undo the last n accepted tokens (n <= num_tokens()), stop tokens included.
  void rollback(size_t n);
  // A stop token was accepted, or the bytes are complete and nothing can follow.
  bool is_terminated() const { return stopped_ || bytes_.is_terminated(); }
  bool can_terminate() const { return !stopped_ && bytes_.can_terminate(); }
  size_t num_tokens() const { return token_lengths_.size(); }
  const MaskCache& cache() const { return *cache_; }

 private:
  void walk_vocabulary(uint32_t* mask);
  // What the fast path may take as accepted from `root` without walking (TextQuery): text
  // tokens made of the ASCII bytes not `excluded`, of at most max_chars code points, and, when
  // `unicode`, those that also have non-ASCII characters, of at most unicode_chars (< 0: any).
  // Proven on the DFA: every such character leads from the root through a chain of states
  // that treat all of them alike (text_run.cc). A chain whose states stop taking some
  // multi-byte character still serves ASCII tokens past that point.
  using TextRun = TextQuery;
  bool find_text_run(int32_t root, TextRun* run);
  // No ASCII run byte leads anywhere from `state`, reached by probe_[0, depth); unicode_dead:
  // nor does any multi-byte character (with run.unicode).
  bool run_chars_dead(int32_t state, size_t depth, const TextRun& run, bool* unicode_dead);
  // The state's ByteDfa::RunInfo, from the DFA's memo or probed (probe_[0, depth) leads to it);
  // false when the work budget ran out (nothing is kept then).
  // with_unicode: also whether every multi-byte character leads to the target.
  bool analyze_run(int32_t state, size_t depth, bool with_unicode, ByteDfa::RunInfo* info);
  // Every multi-byte character leads from `state` (reached by probe_[0, depth)) to `target`.
  bool multibyte_chars_lead_to(size_t depth, int32_t state, int32_t target);
  bool multibyte_form_leads_to(const Utf8Form& form, int k, size_t base, int32_t state,
                               int32_t target);
  // The DFA's transition, computed by a real Earley step when new. The Earley matcher holds
  // probe_[0, held_) beyond the walk's base; probe_[0, depth) must lead to `state`.
  int32_t probe_step(int32_t state, size_t depth, uint8_t b);
  // A new transition: the Earley matcher is at `state` and tries b, keeping it when accepted.
  // Returns (and learns) the next DFA state or kDead.
  int32_t earley_step(int32_t state, uint8_t b);
  void probe_set(size_t depth, uint8_t b);
  void hold_at_most(size_t depth);  // roll the Earley matcher back to probe_[0, depth)
  bool hold_exactly(size_t depth);  // ... or forward to it; false when out of work
  // Records state --b--> to for every byte of b's class (they behave alike, byte_classes.h).
  void learn(int32_t state, uint8_t b, int32_t to);
  // fast_positions: sorted positions already decided (accepted into the mask by the fast path,
  // or proven rejected), which the walk skips; nullptr: none.
  void walk_tokens(int32_t root, const uint64_t* fast_positions, uint32_t* mask);

  std::shared_ptr<const TokenizerInfo> info_;
  std::shared_ptr<MaskCache> cache_;
  static constexpr size_t kMaxDfaStates = 4096;                     // 1 KiB each
  static constexpr size_t kMaxContinuationWords = size_t{4} << 20;  // 16 MiB of encodings
  static constexpr size_t kFastPathMinTokens = 8192;
  std::vector<uint32_t> key_, dfa_key_;  // scratch for state keys
  std::vector<uint32_t> scan_sets_;      // scratch: byte sets the stepped state scans
  std::vector<int32_t> path_state_;      // DFA state per depth of the trie walk
  std::shared_ptr<const CompiledGrammar> grammar_;
  std::vector<uint8_t> probe_;
  size_t held_ = 0;
  EarleyMatcher bytes_;
  std::vector<uint32_t> token_lengths_;  // bytes per accepted token; 0 = stop token
  bool stopped_ = false;
  uint64_t work_budget_;
  uint64_t last_work_ = 0;
  bool budget_exceeded_ = false;
};

}  // namespace deepinfer::grammar

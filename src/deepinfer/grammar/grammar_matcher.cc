#include "deepinfer/grammar/grammar_matcher.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "deepinfer/base/check.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer::grammar {

StatusOr<std::shared_ptr<const TokenizerInfo>> TokenizerInfo::from_tokenizer(
    const tokenizer::Tokenizer& tok, std::vector<int32_t> stop_token_ids) {
  std::vector<std::string> bytes(tok.vocab_size());
  std::vector<bool> usable(tok.vocab_size(), false);
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    auto b = tok.token_bytes(id);
    if (!b.ok()) continue;  // holes in the id space
    bytes[id] = std::string(*b);
    usable[id] = !tok.is_special(id) && !tok.is_added(id);
  }
  return from_vocab(std::move(bytes), std::move(usable), std::move(stop_token_ids));
}

StatusOr<std::shared_ptr<const TokenizerInfo>> TokenizerInfo::from_vocab(
    std::vector<std::string> token_bytes, std::vector<bool> grammar_token,
    std::vector<int32_t> stop_token_ids) {
  if (grammar_token.size() != token_bytes.size()) {
    return invalid_argument("grammar_token has " + std::to_string(grammar_token.size()) +
                            " entries for a vocabulary of " + std::to_string(token_bytes.size()));
  }
  auto info = std::make_shared<TokenizerInfo>();
  for (int32_t id : stop_token_ids) {
    if (id < 0 || id >= static_cast<int32_t>(token_bytes.size())) {
      return invalid_argument("stop token id " + std::to_string(id) + " is outside the vocabulary");
    }
  }
  info->bytes_ = std::move(token_bytes);
  info->grammar_token_ = std::move(grammar_token);
  info->stop_ids_ = std::move(stop_token_ids);
  for (int32_t id = 0; id < info->vocab_size(); ++id) {
    if (info->grammar_token_[id] && !info->bytes_[id].empty() && !info->is_stop(id)) {
      info->sorted_.push_back(id);
    } else {
      info->grammar_token_[id] = false;
    }
  }
  const auto& b = info->bytes_;
  std::sort(info->sorted_.begin(), info->sorted_.end(),
            [&](int32_t x, int32_t y) { return b[x] < b[y]; });
  info->lcp_.resize(info->sorted_.size(), 0);
  for (size_t i = 1; i < info->sorted_.size(); ++i) {
    const std::string& p = b[info->sorted_[i - 1]];
    const std::string& q = b[info->sorted_[i]];
    size_t n = 0;
    while (n < p.size() && n < q.size() && p[n] == q[n]) ++n;
    info->lcp_[i] = static_cast<uint32_t>(n);
  }
  info->sorted_off_.assign(1, 0);
  for (size_t i = 0; i < info->sorted_.size(); ++i) {
    const std::string& t = b[info->sorted_[i]];
    info->max_token_bytes_ = std::max(info->max_token_bytes_, t.size());
    info->sorted_bytes_.insert(info->sorted_bytes_.end(), t.begin(), t.end());
    ++info->first_byte_tokens_[static_cast<uint8_t>(t[0])];
    info->sorted_off_.push_back(static_cast<uint32_t>(info->sorted_bytes_.size()));
  }
  if (info->max_token_bytes_ > 255) {
    return invalid_argument("a token of " + std::to_string(info->max_token_bytes_) +
                            " bytes is longer than the grammar matcher supports (255)");
  }
  auto& levels = info->lcp_min_;
  levels.emplace_back(info->lcp_.begin(), info->lcp_.end());
  for (size_t half = 1; 2 * half <= info->lcp_.size(); half *= 2) {
    const std::vector<uint8_t>& prev = levels.back();
    std::vector<uint8_t> next(prev.size() - half);
    for (size_t i = 0; i < next.size(); ++i) next[i] = std::min(prev[i], prev[i + half]);
    levels.push_back(std::move(next));
  }
  info->text_ = TextTokens(info->bytes_, info->sorted_);
  // The JSON string body (any character but '"', '\\' and controls): every JSON schema has it,
  // so its costly part is tokenizer preprocessing.
  std::array<bool, 128> json_string{};
  for (int b = 0; b < 0x20; ++b) json_string[b] = true;
  json_string['"'] = json_string['\\'] = true;
  info->text_selections_.prepare(info->text_, json_string);
  // Next-smaller-lcp links, by a monotonic stack from the right.
  const uint32_t n_sorted = static_cast<uint32_t>(info->sorted_.size());
  info->skip_.assign(n_sorted, n_sorted);
  std::vector<uint32_t> stack;
  for (uint32_t i = n_sorted; i-- > 0;) {
    while (!stack.empty() && info->lcp_[stack.back()] >= info->lcp_[i]) stack.pop_back();
    info->skip_[i] = stack.empty() ? n_sorted : stack.back();
    stack.push_back(i);
  }
  return std::shared_ptr<const TokenizerInfo>(std::move(info));
}

size_t TokenizerInfo::common_prefix(size_t a, size_t b) const {
  const size_t lo = a + 1, len = b - a;  // min over lcp_[lo, b]
  const int k = std::bit_width(len) - 1;
  return std::min(lcp_min_[k][lo], lcp_min_[k][b + 1 - (size_t{1} << k)]);
}

bool TokenizerInfo::is_stop(int32_t id) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar,
                               std::shared_ptr<const TokenizerInfo> info,
                               std::shared_ptr<MaskCache> cache, uint64_t work_budget)
    : info_(std::move(info)),
      cache_(std::move(cache)),
      grammar_(std::move(grammar)),
      bytes_(grammar_, /*leo=*/true, work_budget),
      work_budget_(work_budget) {
  // Keys that only look max_lookahead() bytes ahead would merge states a longer token tells
  // apart (earley_matcher.h).
  DI_CHECK(info_->max_token_bytes() <= grammar_->max_lookahead());
  last_work_ = bytes_.work();
  budget_exceeded_ = bytes_.out_of_work();
  bytes_.start_work(0);  // each call starts its own budget
  if (!cache_ || cache_->mask_words() != info_->mask_words()) {
    cache_ = std::make_shared<MaskCache>(info_->mask_words(), kDefaultCacheBytes);
  }
}

bool GrammarMatcher::accept_token(int32_t id) {
  bytes_.start_work(work_budget_);
  last_work_ = 0;
  budget_exceeded_ = bytes_.out_of_work();  // the initial set ran out: nothing works
  if (budget_exceeded_ || stopped_ || id < 0 || id >= info_->vocab_size()) return false;
  if (info_->is_stop(id)) {
    if (!bytes_.can_terminate()) return false;
    stopped_ = true;
    token_lengths_.push_back(0);
    return true;
  }
  if (!info_->grammar_token_[id]) return false;
  const std::string& b = info_->bytes_[id];
  const bool ok = bytes_.accept_bytes(b);  // all or nothing, also when out of work
  last_work_ = bytes_.work();
  budget_exceeded_ = bytes_.out_of_work();
  bytes_.start_work(0);  // each call starts its own budget
  bytes_.start_work(0);
  if (!ok) return false;
  token_lengths_.push_back(static_cast<uint32_t>(b.size()));
  return true;
}

bool GrammarMatcher::fill_next_token_bitmask(uint32_t* mask) {
  const size_t bytes = sizeof(uint32_t) * info_->mask_words();
  bytes_.start_work(work_budget_);
  last_work_ = 0;
  budget_exceeded_ = false;
  if (stopped_) {
    std::memset(mask, 0, bytes);
    return true;
  }
  const size_t base = bytes_.num_bytes();
  if (cache_->continuation_ids().words() > kMaxContinuationWords) cache_->clear_all();
  key_.clear();
  bytes_.compact_state_key(&key_, &cache_->continuation_ids());
  if (!bytes_.out_of_work()) {
    const uint64_t h = MaskCache::hash(key_);
    if (const uint32_t* hit = cache_->find(key_, h)) {
      std::memcpy(mask, hit, bytes);
      last_work_ = bytes_.work();
      bytes_.start_work(0);
      return true;
    }
    std::memset(mask, 0, bytes);
    walk_vocabulary(mask);  // uses key_ as the DFA's name for the current state
    if (!bytes_.out_of_work()) {
      cache_->insert(key_, h, mask);
      last_work_ = bytes_.work();
      bytes_.start_work(0);
      return true;
    }
  }
  // Out of work: the walk stopped part-way. It learned only transitions of complete Earley
  // steps and cached nothing, so the shared DFA and cache stay exact.
  bytes_.rollback_bytes(bytes_.num_bytes() - base);
  held_ = 0;
  std::memset(mask, 0, bytes);
  last_work_ = bytes_.work();
  budget_exceeded_ = true;
  bytes_.start_work(0);
  return false;
}

void GrammarMatcher::walk_vocabulary(uint32_t* mask) {
  if (bytes_.can_terminate()) {
    for (int32_t id : info_->stop_ids_) mask[id / 32] |= uint32_t{1} << (id % 32);
  }
  ByteDfa& dfa = cache_->dfa();
  if (dfa.num_states() > kMaxDfaStates) dfa.clear();  // only between walks: ids stay valid
  const ByteSet allowed = bytes_.allowed_bytes();
  const int32_t root = dfa.intern(key_, allowed);
  // Fast path: tokens proven accepted as a whole go into the mask by bitset operations; only
  // the rest of the vocabulary is walked. Not worth its fixed cost (about 20-50 us of bitset
  // work) when few tokens even start with an allowed byte: the walk prunes those at once.
  size_t reachable = 0;
  for (int b = 0; b < 256; ++b) reachable += allowed.test(b) ? info_->first_byte_tokens_[b] : 0;
  TextRun run;
  const uint64_t* fast = nullptr;
  std::shared_ptr<const TextSelectionCache::Selection> selection;  // alive through the walk
  if (reachable >= kFastPathMinTokens && find_text_run(root, &run)) {
    if (bytes_.out_of_work()) return;  // the run was probed on refused steps: not proven
    selection = info_->text_selections_.get(info_->text_, run);
    const std::vector<uint64_t>& ids = selection->ids;
    for (size_t w = 0; w < ids.size(); ++w) {
      mask[2 * w] |= static_cast<uint32_t>(ids[w]);
      if (2 * w + 1 < static_cast<size_t>(info_->mask_words()))
        mask[2 * w + 1] |= static_cast<uint32_t>(ids[w] >> 32);
    }
    fast = selection->positions.data();  // accepted, or rejected past a dead end
    ++cache_->fast_walks;
    if (selection->query.dead_after || selection->query.unicode_dead_after)
      ++cache_->dead_end_walks;
  }
  walk_tokens(root, fast, mask);
}

int32_t GrammarMatcher::earley_step(int32_t state, uint8_t b) {
  int32_t t = ByteDfa::kDead;
  scan_sets_.clear();
  bytes_.scanned_sets(&scan_sets_);  // what the step depends on, read before it
  if (bytes_.accept_byte(b)) {
    dfa_key_.clear();
    bytes_.compact_state_key(&dfa_key_, &cache_->continuation_ids());
    if (bytes_.out_of_work()) {  // incomplete key: undo the byte, learn nothing
      bytes_.rollback_bytes(1);
      return ByteDfa::kDead;
    }
    t = cache_->dfa().intern(dfa_key_, bytes_.allowed_bytes());
  }
  if (bytes_.out_of_work()) return ByteDfa::kDead;  // refused for lack of work, not dead
  learn(state, b, t);
  return t;
}

void GrammarMatcher::learn(int32_t state, uint8_t b, int32_t to) {
  // Bytes in the same grammar-wide class as b behave alike from every state; from this state
  // so do all bytes that the sets its items scan (scan_sets_) treat as they treat b: inside a
  // string, every letter, although property names split the letters into many classes.
  const ByteClasses& classes = grammar_->byte_classes();
  ByteDfa& dfa = cache_->dfa();
  const auto& sets = grammar_->grammar().byte_sets;
  // The bytes every scanned set treats as it treats b: one 256-bit AND per set (a byte-by-byte
  // comparison per class was the largest cost of a new state).
  ByteSet same;
  same.set();
  for (uint32_t s : scan_sets_) same &= sets[s].test(b) ? sets[s] : ~sets[s];
  const uint8_t own = classes.of(b);
  for (int c = 0; c < classes.count(); ++c) {
    const auto& members = classes.members(static_cast<uint8_t>(c));
    if (c != own && (dfa.next(state, members[0]) != ByteDfa::kUnknown || !same.test(members[0])))
      continue;
    for (uint8_t m : members) dfa.set_next(state, m, to);
  }
}

void GrammarMatcher::walk_tokens(int32_t root, const uint64_t* fast, uint32_t* mask) {
  // Walk the sorted vocabulary as a trie: keep the bytes shared with the previous walked token
  // matched, and skip every token that extends a prefix already rejected. Steps go through the
  // lazy DFA; the Earley matcher only catches up (phys bytes) when a transition is new.
  ByteDfa& dfa = cache_->dfa();
  const size_t base = bytes_.num_bytes();
  const auto& sorted = info_->sorted_;
  const auto& lcp = info_->lcp_;
  const auto& skip = info_->skip_;
  const size_t n = sorted.size();
  // The first position >= i that is not already known to be accepted.
  auto next_to_walk = [&](size_t i) -> size_t {
    if (fast == nullptr) return i;
    while (i < n) {
      const uint64_t todo = ~fast[i / 64] & (~uint64_t{0} << (i % 64));
      if (todo != 0) return std::min(n, i / 64 * 64 + static_cast<size_t>(std::countr_zero(todo)));
      i = (i / 64 + 1) * 64;
    }
    return n;
  };
  path_state_.resize(info_->max_token_bytes_ + 1);
  path_state_[0] = root;
  const uint8_t* all_bytes = info_->sorted_bytes_.data();
  const uint32_t* off = info_->sorted_off_.data();
  const int32_t* trans = dfa.table();
  size_t phys = 0;  // bytes of the current token the Earley matcher holds beyond base
  size_t prev = 0;  // the last walked position; path_state_ holds its walked prefix
  bool walked = false;
  int64_t walked_count = 0;
  for (size_t i = next_to_walk(0); i < n;) {
    // A walked token shares the path only up to its common prefix with the last walked one
    // (tokens in between were skipped for a dead prefix, or are known accepted).
    size_t depth = !walked ? 0 : i == prev + 1 ? lcp[i] : info_->common_prefix(prev, i);
    if (phys > depth) {
      bytes_.rollback_bytes(phys - depth);
      phys = depth;
    }
    const uint8_t* tok = all_bytes + off[i];
    const uint8_t* q = tok + depth;
    const uint8_t* end = all_bytes + off[i + 1];
    int32_t state = path_state_[depth];
    for (; q < end; ++q) {
      int32_t t = trans[state * 256 + *q];
      if (t == ByteDfa::kUnknown) {
        for (; phys < depth; ++phys) {
          bool ok = bytes_.accept_byte(tok[phys]);
          if (!ok && bytes_.out_of_work()) break;
          DI_CHECK(ok);  // the DFA said these bytes are viable
        }
        if (!bytes_.out_of_work()) t = earley_step(state, *q);
        if (bytes_.out_of_work()) {  // fill_next_token_bitmask discards the mask
          bytes_.rollback_bytes(bytes_.num_bytes() - base);
          return;
        }
        if (t != ByteDfa::kDead) ++phys;
        trans = dfa.table();  // interning may grow the table
      }
      if (t == ByteDfa::kDead) break;
      path_state_[++depth] = state = t;
    }
    prev = i;
    walked = true;
    ++walked_count;
    if (q == end) {
      const int32_t id = sorted[i];
      mask[id / 32] |= uint32_t{1} << (id % 32);
      i = next_to_walk(i + 1);
      continue;
    }
    // The token's first depth + 1 bytes (the rejected byte included) are dead: skip tokens
    // that share them.
    const size_t dead = depth + 1;
    ++i;
    while (i < n && lcp[i] >= dead) i = skip[i];
    i = next_to_walk(i);
  }
  cache_->walked_tokens += walked_count;
  bytes_.rollback_bytes(bytes_.num_bytes() - base);
}

void GrammarMatcher::rollback(size_t n) {
  DI_CHECK(n <= token_lengths_.size());
  for (size_t k = 0; k < n; ++k) {
    uint32_t len = token_lengths_.back();
    token_lengths_.pop_back();
    if (len == 0) {
      stopped_ = false;
    } else {
      bytes_.rollback_bytes(len);
    }
  }
}

}  // namespace deepinfer::grammar

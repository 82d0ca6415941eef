#include "deepinfer/grammar/grammar_matcher.h"

#include <algorithm>
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
  info->suffix_off_.assign(1, 0);
  for (size_t i = 0; i < info->sorted_.size(); ++i) {
    const std::string& t = b[info->sorted_[i]];
    info->max_token_bytes_ = std::max(info->max_token_bytes_, t.size());
    info->suffix_bytes_.insert(info->suffix_bytes_.end(), t.begin() + info->lcp_[i], t.end());
    info->suffix_off_.push_back(static_cast<uint32_t>(info->suffix_bytes_.size()));
  }
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

bool TokenizerInfo::is_stop(int32_t id) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar,
                               std::shared_ptr<const TokenizerInfo> info,
                               std::shared_ptr<MaskCache> cache)
    : info_(std::move(info)), cache_(std::move(cache)), bytes_(std::move(grammar)) {
  if (!cache_ || cache_->mask_words() != info_->mask_words()) {
    cache_ = std::make_shared<MaskCache>(info_->mask_words(), kDefaultCacheBytes);
  }
}

bool GrammarMatcher::accept_token(int32_t id) {
  if (stopped_ || id < 0 || id >= info_->vocab_size()) return false;
  if (info_->is_stop(id)) {
    if (!bytes_.can_terminate()) return false;
    stopped_ = true;
    token_lengths_.push_back(0);
    return true;
  }
  if (!info_->grammar_token_[id]) return false;
  const std::string& b = info_->bytes_[id];
  if (!bytes_.accept_bytes(b)) return false;
  token_lengths_.push_back(static_cast<uint32_t>(b.size()));
  return true;
}

void GrammarMatcher::fill_next_token_bitmask(uint32_t* mask) {
  const size_t bytes = sizeof(uint32_t) * info_->mask_words();
  if (stopped_) {
    std::memset(mask, 0, bytes);
    return;
  }
  key_.clear();
  bytes_.state_key(&key_);
  const uint64_t h = MaskCache::hash(key_);
  if (const uint32_t* hit = cache_->find(key_, h)) {
    std::memcpy(mask, hit, bytes);
    return;
  }
  std::memset(mask, 0, bytes);
  walk_vocabulary(mask);  // uses key_ as the DFA's name for the current state
  cache_->insert(key_, h, mask);
}

void GrammarMatcher::walk_vocabulary(uint32_t* mask) {
  auto allow = [&](int32_t id) { mask[id / 32] |= uint32_t{1} << (id % 32); };
  if (bytes_.can_terminate()) {
    for (int32_t id : info_->stop_ids_) allow(id);
  }
  // Walk the sorted vocabulary as a trie: keep the bytes shared with the previous token
  // matched, and skip every token that extends a prefix already rejected. Steps go through the
  // lazy DFA; the Earley matcher only catches up (phys bytes) when a transition is new.
  ByteDfa& dfa = cache_->dfa();
  if (dfa.num_states() > kMaxDfaStates) dfa.clear();  // only between walks: ids stay valid
  const size_t base = bytes_.num_bytes();
  const auto& sorted = info_->sorted_;
  const auto& lcp = info_->lcp_;
  const auto& skip = info_->skip_;
  path_state_.resize(info_->max_token_bytes_ + 1);
  path_state_[0] = dfa.intern(key_, bytes_.allowed_bytes());
  // A visited token always shares exactly lcp_[i] bytes with the path walked so far (tokens
  // in between were skipped for sharing a longer, dead prefix), so only its suffix is walked.
  const uint8_t* suffix = info_->suffix_bytes_.data();
  const uint32_t* off = info_->suffix_off_.data();
  const int32_t* trans = dfa.table();
  size_t phys = 0;  // bytes of the current token the Earley matcher holds beyond base
  size_t i = 0;
  while (i < sorted.size()) {
    size_t depth = lcp[i];
    if (phys > depth) {
      bytes_.rollback_bytes(phys - depth);
      phys = depth;
    }
    const uint8_t* q = suffix + off[i];
    const uint8_t* end = suffix + off[i + 1];
    int32_t state = path_state_[depth];
    for (; q < end; ++q) {
      int32_t t = trans[state * 256 + *q];
      if (t == ByteDfa::kUnknown) {
        const std::string& tok = info_->bytes_[sorted[i]];
        for (; phys < depth; ++phys) {
          bool ok = bytes_.accept_byte(static_cast<uint8_t>(tok[phys]));
          DI_CHECK(ok);  // the DFA said these bytes are viable
        }
        if (bytes_.accept_byte(*q)) {
          ++phys;
          dfa_key_.clear();
          bytes_.state_key(&dfa_key_);
          t = dfa.intern(dfa_key_, bytes_.allowed_bytes());
          trans = dfa.table();  // interning may grow the table
        } else {
          t = ByteDfa::kDead;
        }
        dfa.set_next(state, *q, t);
      }
      if (t == ByteDfa::kDead) break;
      path_state_[++depth] = state = t;
    }
    if (q == end) {
      allow(sorted[i]);
      ++i;
      continue;
    }
    // The token's first depth + 1 bytes (the rejected byte included) are dead: skip tokens
    // that share them.
    const size_t dead = depth + 1;
    ++i;
    while (i < sorted.size() && lcp[i] >= dead) i = skip[i];
  }
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

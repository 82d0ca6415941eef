#include "deepinfer/grammar/text_tokens.h"

#include <algorithm>

namespace deepinfer::grammar {
namespace {

// Code points of a well-formed UTF-8 string, or -1. The last one may be cut: a proper prefix
// of a well-formed character (a byte-level token that ends mid-character) counts as one, since
// the token is accepted exactly where that whole character could be.
int count_chars(const std::string& s) {
  int chars = 0;
  for (size_t i = 0; i < s.size(); ++chars) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    bool matched = false;
    for (const Utf8Form& f : multibyte_utf8_forms()) {
      const size_t have = std::min<size_t>(f.length, s.size() - i);
      bool ok = true;
      for (size_t k = 0; k < have && ok; ++k) {
        const uint8_t b = static_cast<uint8_t>(s[i + k]);
        ok = b >= f.ranges[k].first && b <= f.ranges[k].second;
      }
      if (ok) {
        i += have;
        matched = true;
        break;
      }
    }
    if (!matched) return -1;
  }
  return chars;
}

void set_bit(std::vector<uint64_t>& v, size_t base, size_t bit) {
  v[base + bit / 64] |= uint64_t{1} << (bit % 64);
}

}  // namespace

const std::vector<Utf8Form>& multibyte_utf8_forms() {
  static const std::vector<Utf8Form> forms = {
      {2, {{{0xC2, 0xDF}, {0x80, 0xBF}}}},
      {3, {{{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}}}},
      {3, {{{0xE1, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}}}},
      {3, {{{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}}}},
      {3, {{{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}}}},
      {4, {{{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}}}},
      {4, {{{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}}}},
      {4, {{{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}}}},
  };
  return forms;
}

TextTokens::TextTokens(const std::vector<std::string>& bytes, const std::vector<int32_t>& sorted)
    : id_words_((bytes.size() + 63) / 64), pos_words_((sorted.size() + 63) / 64) {
  text_id_.assign(id_words_, 0);
  text_pos_.assign(pos_words_, 0);
  nonascii_id_.assign(id_words_, 0);
  nonascii_pos_.assign(pos_words_, 0);
  has_byte_id_.assign(128 * id_words_, 0);
  has_byte_pos_.assign(128 * pos_words_, 0);
  longer_id_.assign((kMaxChars + 1) * id_words_, 0);
  longer_pos_.assign((kMaxChars + 1) * pos_words_, 0);
  for (size_t pos = 0; pos < sorted.size(); ++pos) {
    const size_t id = static_cast<size_t>(sorted[pos]);
    const std::string& s = bytes[id];
    const int chars = count_chars(s);
    if (chars < 0) continue;
    set_bit(text_id_, 0, id);
    set_bit(text_pos_, 0, pos);
    std::array<bool, 128> seen{};
    bool nonascii = false;
    for (char ch : s) {
      const uint8_t b = static_cast<uint8_t>(ch);
      if (b >= 0x80) {
        nonascii = true;
      } else if (!seen[b]) {
        seen[b] = byte_used_[b] = true;
        set_bit(has_byte_id_, b * id_words_, id);
        set_bit(has_byte_pos_, b * pos_words_, pos);
      }
    }
    if (nonascii) {
      set_bit(nonascii_id_, 0, id);
      set_bit(nonascii_pos_, 0, pos);
    }
    for (int d = 0; d <= kMaxChars && d < chars; ++d) {
      set_bit(longer_id_, d * id_words_, id);
      set_bit(longer_pos_, d * pos_words_, pos);
    }
  }
}

void TextTokens::base(const std::array<bool, 128>& excluded, Base* out) const {
  out->excluded = excluded;
  auto space = [&](const std::vector<uint64_t>& text, const std::vector<uint64_t>& has_byte,
                   const std::vector<uint64_t>& nonascii, size_t words,
                   std::vector<uint64_t>* ascii, std::vector<uint64_t>* unicode) {
    std::vector<uint64_t> all(text);
    for (int b = 0; b < 128; ++b) {
      if (!excluded[b] || !byte_used_[b]) continue;
      const uint64_t* h = has_byte.data() + b * words;
      for (size_t w = 0; w < words; ++w) all[w] &= ~h[w];
    }
    ascii->resize(words);
    unicode->resize(words);
    for (size_t w = 0; w < words; ++w) {
      (*ascii)[w] = all[w] & ~nonascii[w];
      (*unicode)[w] = all[w] & nonascii[w];
    }
  };
  space(text_id_, has_byte_id_, nonascii_id_, id_words_, &out->ascii_id, &out->unicode_id);
  space(text_pos_, has_byte_pos_, nonascii_pos_, pos_words_, &out->ascii_pos, &out->unicode_pos);
}

void TextTokens::select(const Base& base, const TextQuery& q, std::vector<uint64_t>* ids,
                        std::vector<uint64_t>* positions) const {
  auto space = [&](const std::vector<uint64_t>& ascii, const std::vector<uint64_t>& unicode,
                   const std::vector<uint64_t>& longer, size_t words, bool decided,
                   std::vector<uint64_t>* out) {
    // Tokens of at most `chars` code points: all of them (< 0), or those not longer.
    auto upto = [&](int chars) -> const uint64_t* {
      return chars < 0 ? nullptr : longer.data() + std::min(chars, kMaxChars) * words;
    };
    const uint64_t* ascii_over = upto(q.max_chars);
    const uint64_t* unicode_over = upto(q.unicode_chars);
    out->resize(words);
    for (size_t w = 0; w < words; ++w) {
      const uint64_t a = ascii[w], u = q.unicode ? unicode[w] : 0;
      uint64_t o =
          (ascii_over ? a & ~ascii_over[w] : a) | (unicode_over ? u & ~unicode_over[w] : u);
      if (decided && ascii_over) {
        if (q.dead_after) o |= a & ascii_over[w];
        if (q.unicode_dead_after) o |= u & ascii_over[w];
      }
      (*out)[w] = o;
    }
  };
  space(base.ascii_id, base.unicode_id, longer_id_, id_words_, false, ids);
  space(base.ascii_pos, base.unicode_pos, longer_pos_, pos_words_, true, positions);
}

std::shared_ptr<const TextTokens::Base> TextSelectionCache::base_for(
    const TextTokens& text, const std::array<bool, 128>& excluded) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& b : bases_) {
      if (b->excluded == excluded) return b;
    }
  }
  auto b = std::make_shared<TextTokens::Base>();
  text.base(excluded, b.get());
  std::lock_guard<std::mutex> lock(mu_);
  if (bases_.size() >= kMaxBases) bases_.erase(bases_.begin());  // holders keep theirs alive
  bases_.push_back(b);
  return b;
}

void TextSelectionCache::prepare(const TextTokens& text,
                                 const std::array<bool, 128>& excluded) const {
  base_for(text, excluded);
}

std::shared_ptr<const TextSelectionCache::Selection> TextSelectionCache::get(const TextTokens& text,
                                                                             TextQuery q) const {
  auto norm = [](int chars) { return chars < 0 ? -1 : std::min(chars, TextTokens::kMaxChars); };
  q.max_chars = norm(q.max_chars);
  q.unicode_chars = q.unicode ? norm(q.unicode_chars) : 0;
  q.dead_after = q.dead_after && q.max_chars >= 0;
  q.unicode_dead_after = q.unicode_dead_after && q.unicode && q.max_chars >= 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& e : entries_) {
      if (e->query == q) return e;
    }
  }
  auto base = base_for(text, q.excluded);
  auto e = std::make_shared<Selection>();
  e->query = q;
  text.select(*base, q, &e->ids, &e->positions);
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.size() >= kMaxEntries) entries_.clear();  // holders keep theirs alive
  entries_.push_back(e);
  return e;
}

}  // namespace deepinfer::grammar

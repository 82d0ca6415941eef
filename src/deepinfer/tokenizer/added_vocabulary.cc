#include "deepinfer/tokenizer/added_vocabulary.h"

#include <algorithm>

#include "deepinfer/tokenizer/byte_level.h"

namespace deepinfer::tokenizer {
namespace {

// Rust's char::is_whitespace (Unicode White_Space), which HF uses for lstrip/rstrip.
bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool is_word_char(char32_t c) {
  // Approximates Rust's char::is_alphanumeric: ASCII alnum/underscore plus any non-space,
  // non-ASCII code point above Latin-1 punctuation.
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return c >= 0xC0 && !is_whitespace(c);
}

// Code point ending right before byte offset `pos` (0 if none).
char32_t char_before(std::string_view s, size_t pos, size_t* start) {
  size_t i = pos;
  while (i > 0) {
    --i;
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) break;
  }
  char32_t cp = 0;
  if (decode_utf8(s, i, &cp) == 0) cp = 0xFFFD;
  *start = i;
  return cp;
}

}  // namespace

void AddedTokenMatcher::add(const AddedToken& token) {
  if (token.content.empty()) return;
  int32_t node = 0;
  for (unsigned char c : token.content) {
    int32_t next = -1;
    for (auto& [b, k] : nodes_[node].kids)
      if (b == c) next = k;
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_[node].kids.emplace_back(c, next);
      nodes_.push_back(Node{});
    }
    node = next;
  }
  if (nodes_[node].token >= 0) {
    tokens_[nodes_[node].token] = token;  // a later entry with the same text wins
    return;
  }
  nodes_[node].token = static_cast<int32_t>(tokens_.size());
  tokens_.push_back(token);
  first_byte_[static_cast<unsigned char>(token.content[0])] = true;
}

int32_t AddedTokenMatcher::longest_at(std::string_view text, size_t pos, size_t limit,
                                      size_t* len) const {
  int32_t node = 0, best = -1;
  for (size_t i = pos; i < limit; ++i) {
    unsigned char c = text[i];
    int32_t next = -1;
    for (auto& [b, k] : nodes_[node].kids)
      if (b == c) {
        next = k;
        break;
      }
    if (next < 0) break;
    node = next;
    if (nodes_[node].token >= 0) {
      best = nodes_[node].token;
      *len = i + 1 - pos;
    }
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>* out) const {
  const std::pair<size_t, size_t> all{0, text.size()};
  split_in(text, std::span(&all, 1), out);
}

void AddedTokenMatcher::split_in(std::string_view text,
                                 std::span<const std::pair<size_t, size_t>> ranges,
                                 std::vector<Segment>* out) const {
  size_t emitted = 0;  // end of the last segment pushed
  for (const auto& [range_begin, range_end] : ranges) {
    // rstrip of the previous match may have run past this range's start.
    for (size_t pos = std::max(range_begin, emitted); pos < range_end; ++pos) {
      if (!first_byte_[static_cast<unsigned char>(text[pos])]) continue;
      size_t len = 0;
      int32_t t = longest_at(text, pos, range_end, &len);
      if (t < 0) continue;
      const AddedToken& tok = tokens_[t];
      size_t start = pos, stop = pos + len;
      if (tok.single_word) {
        size_t ps;
        bool left_ok = start == 0 || !is_word_char(char_before(text, start, &ps));
        char32_t next_cp = 0;
        bool right_ok =
            stop == text.size() || decode_utf8(text, stop, &next_cp) == 0 || !is_word_char(next_cp);
        if (!left_ok || !right_ok) continue;
      }
      if (tok.lstrip) {
        while (start > emitted) {
          size_t ps;
          if (!is_whitespace(char_before(text, start, &ps))) break;
          start = ps;
        }
      }
      if (tok.rstrip) {
        char32_t cp;
        int n;
        while (stop < text.size() && (n = decode_utf8(text, stop, &cp)) > 0 && is_whitespace(cp))
          stop += n;
      }
      if (start > emitted) out->push_back({emitted, start, -1});
      out->push_back({start, stop, tok.id});
      emitted = stop;
      pos = stop - 1;
    }
  }
  if (emitted < text.size()) out->push_back({emitted, text.size(), -1});
}

}  // namespace deepinfer::tokenizer

// Per-tokenizer index of "text" tokens for the mask fast path: tokens that are well-formed
// UTF-8, the last character possibly cut (a proper prefix of a well-formed character, as
// byte-level BPE makes; it counts as a character, since the token is viable exactly where the
// whole character could follow, and as non-ASCII). For each, which ASCII bytes it contains,
// whether it has non-ASCII characters and how many code points it has, kept as bitsets twice:
// over token ids (ORed straight into a mask) and over sorted positions (what remains to be
// walked, in trie order).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace deepinfer::grammar {

// One well-formed UTF-8 encoding shape (Unicode Table 3-7): ranges[k] is the k-th byte's range.
struct Utf8Form {
  int length;
  std::array<std::pair<uint8_t, uint8_t>, 4> ranges;
};
// The eight multi-byte forms (2-, 3- and 4-byte; ASCII is handled byte by byte).
const std::vector<Utf8Form>& multibyte_utf8_forms();

// What the mask fast path takes from the index (grammar_matcher.h, TextRun): text tokens of
// the ASCII bytes not `excluded` with at most max_chars code points, and, when `unicode`, those
// that also have non-ASCII characters with at most unicode_chars (< 0: any; unicode_chars <=
// max_chars when both are limits). dead_after: every ASCII run byte is dead after max_chars
// characters, so longer ASCII run tokens are rejected; unicode_dead_after: so are longer
// tokens with non-ASCII characters (their characters were proven along the whole chain).
struct TextQuery {
  std::array<bool, 128> excluded{};
  bool unicode = false;
  int max_chars = 0;
  int unicode_chars = 0;
  bool dead_after = false;
  bool unicode_dead_after = false;
  bool operator==(const TextQuery&) const = default;
};

class TextTokens {
 public:
  // Tokens longer than this many code points are never accepted by the fast path (56 of the
  // 128k DeepSeek tokens), which bounds the chain of counting states the proof has to follow.
  static constexpr int kMaxChars = 32;

  TextTokens() = default;
  // sorted[i]: token id at sorted position i; bytes: every id's bytes.
  TextTokens(const std::vector<std::string>& bytes, const std::vector<int32_t>& sorted);

  // Words of 64 bits: over ids (vocabulary size) and over sorted positions.
  size_t id_words() const { return id_words_; }
  size_t pos_words() const { return pos_words_; }
  // The text tokens containing none of `excluded` ASCII bytes, all-ASCII ones and those with a
  // non-ASCII character apart, in both spaces: the costly part of a selection (one pass per
  // excluded byte), shared by every query with those bytes.
  struct Base {
    std::array<bool, 128> excluded{};
    std::vector<uint64_t> ascii_id, ascii_pos, unicode_id, unicode_pos;
  };
  void base(const std::array<bool, 128>& excluded, Base* out) const;
  // One pass over `base`: the accepted tokens over ids, and the decided ones (accepted, or
  // rejected by dead_after / unicode_dead_after) over sorted positions.
  void select(const Base& base, const TextQuery& q, std::vector<uint64_t>* ids,
              std::vector<uint64_t>* positions) const;

 private:
  size_t id_words_ = 0, pos_words_ = 0;
  std::array<bool, 128> byte_used_{};  // some text token contains the ASCII byte
  // Each in both spaces; has_byte_ and longer_ are [key][words].
  std::vector<uint64_t> text_id_, text_pos_;
  std::vector<uint64_t> has_byte_id_, has_byte_pos_;  // key: ASCII byte
  std::vector<uint64_t> nonascii_id_, nonascii_pos_;
  std::vector<uint64_t> longer_id_, longer_pos_;  // key d in [0, kMaxChars]: > d code points
};

// TextTokens::select results, remembered per query and shared by every grammar and thread
// using the tokenizer: the same few runs recur (every JSON string body is one run; a maxLength
// string adds one per remaining count up to kMaxChars). A Base costs up to a few hundred
// microseconds of bitset work over the whole vocabulary and is kept per excluded set; a query
// on it costs a few.
class TextSelectionCache {
 public:
  struct Selection {
    TextQuery query;
    std::vector<uint64_t> ids, positions;
  };
  // The query is normalized first (limits above kMaxChars are kMaxChars, flags that cannot
  // apply are cleared), so equal selections share one entry.
  std::shared_ptr<const Selection> get(const TextTokens& text, TextQuery q) const;
  // Computes the Base of `excluded` ahead of use (tokenizer preprocessing).
  void prepare(const TextTokens& text, const std::array<bool, 128>& excluded) const;

 private:
  std::shared_ptr<const TextTokens::Base> base_for(const TextTokens& text,
                                                   const std::array<bool, 128>& excluded) const;
  static constexpr size_t kMaxBases = 16;     // 64 KiB each with a 128k vocabulary
  static constexpr size_t kMaxEntries = 256;  // 32 KiB each
  mutable std::mutex mu_;
  mutable std::vector<std::shared_ptr<const TextTokens::Base>> bases_;
  mutable std::vector<std::shared_ptr<const Selection>> entries_;
};

}  // namespace deepinfer::grammar

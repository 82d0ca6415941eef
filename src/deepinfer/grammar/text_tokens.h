// Per-tokenizer index of "text" tokens for the mask fast path: tokens that are complete,
// well-formed UTF-8. For each, which ASCII bytes it contains, whether it has non-ASCII
// characters and how many code points it has, kept as bitsets twice: over token ids (ORed
// straight into a mask) and over sorted positions (what remains to be walked, in trie order).
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

class TextTokens {
 public:
  // Tokens longer than this many code points are never on the fast path (56 of the 128k
  // DeepSeek tokens), which bounds the chain of counting states the proof has to follow.
  static constexpr int kMaxChars = 32;

  TextTokens() = default;
  // sorted[i]: token id at sorted position i; bytes: every id's bytes.
  TextTokens(const std::vector<std::string>& bytes, const std::vector<int32_t>& sorted);

  // Words of 64 bits: over ids (vocabulary size) and over sorted positions.
  size_t id_words() const { return id_words_; }
  size_t pos_words() const { return pos_words_; }
  // The set of text tokens containing none of `excluded` ASCII bytes, with no non-ASCII
  // character unless `unicode`, and with at most `max_chars` code points (< 0: no limit).
  // Written over ids to `ids` and over sorted positions to `positions`.
  void select(const std::array<bool, 128>& excluded, bool unicode, int max_chars,
              std::vector<uint64_t>* ids, std::vector<uint64_t>* positions) const;

 private:
  void select_space(const std::vector<uint64_t>& text, const std::vector<uint64_t>& has_byte,
                    const std::vector<uint64_t>& nonascii, const std::vector<uint64_t>& longer,
                    size_t words, const std::array<bool, 128>& excluded, bool unicode,
                    int max_chars, std::vector<uint64_t>* out) const;

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
// string adds one per remaining count up to kMaxChars), and a selection costs up to a few
// hundred microseconds of bitset work over the whole vocabulary.
class TextSelectionCache {
 public:
  struct Selection {
    std::array<bool, 128> excluded;
    bool unicode;
    int max_chars;
    std::vector<uint64_t> ids, positions;
  };
  std::shared_ptr<const Selection> get(const TextTokens& text,
                                       const std::array<bool, 128>& excluded, bool unicode,
                                       int max_chars) const;

 private:
  static constexpr size_t kMaxEntries = 256;  // 32 KiB each with a 128k vocabulary
  mutable std::mutex mu_;
  mutable std::vector<std::shared_ptr<const Selection>> entries_;
};

}  // namespace deepinfer::grammar

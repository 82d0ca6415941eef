// Added tokens ("<｜User｜>", BOS, ...): matched in raw text before BPE, leftmost-longest.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deepinfer::tokenizer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool single_word = false;
};

// One stretch of text: either an added token (id >= 0) or ordinary text (id == -1).
struct Segment {
  size_t begin;
  size_t end;
  int32_t id;
};

// Byte trie over a set of added tokens.
class AddedTokenMatcher {
 public:
  void add(const AddedToken& token);
  bool empty() const { return tokens_.empty(); }
  // Splits text into segments, with HF's rules for single_word, lstrip and rstrip.
  void split(std::string_view text, std::vector<Segment>* out) const;
  // Same, but a token matches only where it lies wholly inside one of `ranges` (sorted,
  // disjoint [begin, end) byte ranges). Context checks (single_word, lstrip, rstrip) still see
  // the whole text, so a match inside a range is exactly what split() would find there.
  void split_in(std::string_view text, std::span<const std::pair<size_t, size_t>> ranges,
                std::vector<Segment>* out) const;

 private:
  struct Node {
    int32_t token = -1;  // index into tokens_
    std::vector<std::pair<uint8_t, int32_t>> kids;
  };
  // Longest token starting at pos and ending at or before `limit`.
  int32_t longest_at(std::string_view text, size_t pos, size_t limit, size_t* len) const;
  std::vector<Node> nodes_{Node{}};
  std::vector<AddedToken> tokens_;
  bool first_byte_[256] = {};
};

}  // namespace deepinfer::tokenizer

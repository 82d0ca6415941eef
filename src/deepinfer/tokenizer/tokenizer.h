// Byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json (DeepSeek V3/V4 family).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/tokenizer/added_vocabulary.h"

namespace deepinfer::tokenizer {

class BpeModel;
class Normalizer;
class PreTokenizer;

// One stretch of a text to encode, and whether added tokens may match inside it.
struct TextSpan {
  std::string_view text;
  bool parse_special = false;
};

class Tokenizer {
 public:
  // `path` is a tokenizer.json file or a directory holding one.
  static StatusOr<std::unique_ptr<Tokenizer>> from_file(const std::string& path);
  // `origin` names the source in error messages.
  static StatusOr<std::unique_ptr<Tokenizer>> from_json_text(std::string_view json,
                                                             const std::string& origin);
  ~Tokenizer();

  // parse_special=true matches every added token in the text (HF's normal encoding);
  // false treats their text as ordinary text (pure pre-tokenizer + BPE). No BOS is added.
  // Thread-safe.
  StatusOr<std::vector<int32_t>> encode(std::string_view text, bool parse_special = true) const;
  Status encode_into(std::string_view text, bool parse_special, std::vector<int32_t>* out) const;

  // Encodes the spans' concatenation as one text, except that an added token (special or not)
  // matches only wholly inside a run of parse_special spans; in the other spans its text is
  // ordinary text. Ordinary text is pre-tokenized and BPE-encoded across span boundaries, so
  // when every added-token match of the concatenation lies inside parse_special spans, the ids
  // equal encode(concatenation). For prompts whose user-supplied parts must not forge control
  // tokens (recipe::encode_chat_request_segmented).
  StatusOr<std::vector<int32_t>> encode_spans(std::span<const TextSpan> spans) const;
  Status encode_spans_into(std::span<const TextSpan> spans, std::vector<int32_t>* out) const;

  // Invalid UTF-8 in the concatenated bytes becomes U+FFFD, as HF's ByteLevel decoder does.
  StatusOr<std::string> decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // Raw bytes of one token (what decode concatenates); error for unknown ids.
  StatusOr<std::string_view> token_bytes(int32_t id) const;

  int32_t vocab_size() const { return static_cast<int32_t>(bytes_offset_.size()) - 1; }
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool is_special(int32_t id) const;
  bool is_added(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const { return added_; }

 private:
  Tokenizer();
  Status encode_ordinary(std::string_view text, std::vector<int32_t>* out) const;
  Status encode_normalized(std::string_view text, bool parse_special,
                           std::vector<int32_t>* out) const;

  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::vector<AddedToken> added_;
  AddedTokenMatcher raw_matcher_;         // normalized=false tokens, matched on raw text
  AddedTokenMatcher normalized_matcher_;  // normalized=true tokens, matched after normalizing
  std::string bytes_;                     // decode bytes of every id, concatenated
  std::vector<uint32_t> bytes_offset_;    // id -> [offset[id], offset[id+1])
  std::vector<uint8_t> flags_;            // bit0 known, bit1 special, bit2 added
};

}  // namespace deepinfer::tokenizer

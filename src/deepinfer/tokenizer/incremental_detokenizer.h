// Streaming decode: text deltas that are always whole UTF-8 characters.
#pragma once

#include <cstdint>
#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {

// Bytes of a character split across tokens are held back until it completes; invalid bytes
// become U+FFFD exactly where a whole-sequence decode would put them, so the concatenation of
// all deltas plus finish() equals Tokenizer::decode of all ids.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tok, bool skip_special = false)
      : tok_(tok), skip_special_(skip_special) {}

  // Appends the newly complete text to *delta (possibly nothing).
  Status push(int32_t id, std::string* delta);
  // Flushes held-back bytes (as U+FFFD, since they never completed).
  void finish(std::string* delta);
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace deepinfer::tokenizer

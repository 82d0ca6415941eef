// Engram's compressed vocabulary (V4.1, ENGRAM.md): token id -> compressed id, where tokens whose
// decoded text normalizes alike ("The", " the", "THE") share an id.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::tokenizer {
class Tokenizer;
}

namespace deepinfer::v41 {

// transformers' normalizer chain on valid UTF-8: NFKC, NFD, drop combining marks (general
// category M), per-code-point full lowercase, runs of [ \t\r\n] -> one space, then strip
// Unicode White_Space at both ends except that a text of exactly " " stays " ".
StatusOr<std::string> engram_normalize(std::string_view text);

// One vocabulary entry as the map sees it.
struct EngramVocabEntry {
  std::string text;  // the token decoded alone (invalid UTF-8 repaired to U+FFFD)
  std::string raw;   // the token string as in tokenizer.json (byte-level alphabet)
};

struct EngramTokenMap {
  std::vector<int64_t> compressed;  // token id -> compressed id
  int64_t compressed_vocab_size = 0;
};

// Key of an entry: its raw string if the decoded text holds U+FFFD (a partial UTF-8 byte
// token), else the normalized text, or the text itself if that normalizes to "". Compressed ids
// are numbered by first appearance in token-id order.
StatusOr<EngramTokenMap> build_engram_token_map(std::span<const EngramVocabEntry> vocab);

// The same over every id of `tokenizer` (its full vocabulary, added tokens included; ids it
// does not know decode to "").
StatusOr<EngramTokenMap> build_engram_token_map(const tokenizer::Tokenizer& tokenizer);

}  // namespace deepinfer::v41

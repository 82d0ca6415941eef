// What kv/ knows of a model: its state comes in fixed-size pages. A runner derives this from its
// own state layout and allocates the pool it describes.
#pragma once

#include <cstdint>

namespace deepinfer::kv {

struct PageSpec {
  int page_tokens = 0;                 // tokens of growing state per page (> 0)
  int64_t page_bytes = 0;              // bytes of one page (> 0)
  int64_t constant_pages_per_seq = 0;  // pages every sequence holds from its first token on
  int64_t num_pages = 0;               // pages in the pool

  // Growing pages for a sequence holding `tokens` tokens.
  int64_t pages_for_tokens(int64_t tokens) const {
    return tokens <= 0 ? 0 : (tokens + page_tokens - 1) / page_tokens;
  }
};

// Copy page `from` to page `to` (a forked sequence's own copy of a page it can't share).
struct PageCopy {
  int32_t from = 0;
  int32_t to = 0;
  bool operator==(const PageCopy&) const = default;
};

}  // namespace deepinfer::kv

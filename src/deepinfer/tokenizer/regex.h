// PCRE2 (JIT) regex with the Unicode semantics tokenizer.json patterns expect.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::tokenizer {

class Regex {
 public:
  // Compiles with UTF + UCP so \p{..}, \s and \w are Unicode-aware; invalid UTF-8 in a subject
  // never matches across the bad bytes instead of being undefined behaviour.
  static StatusOr<std::unique_ptr<Regex>> compile(std::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the [begin, end) byte ranges of all non-overlapping non-empty matches within
  // subject. Lookarounds see only subject, as in HF's per-piece splitting.
  Status find_all(std::string_view subject, std::vector<std::pair<size_t, size_t>>* out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code*
};

}  // namespace deepinfer::tokenizer

// UTF-8 repair with the "maximal subpart" rule (one U+FFFD per bad stretch), as Rust's
// String::from_utf8_lossy does, so our decode matches HF byte for byte.
#pragma once

#include <string>
#include <string_view>

namespace deepinfer::tokenizer {

// Appends the repaired form of bytes[0, n) to *out. When `final` is false, an incomplete but
// so-far-valid sequence at the very end is not consumed; returns the number of bytes consumed.
size_t utf8_lossy_append(std::string_view bytes, bool final, std::string* out);

inline std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  utf8_lossy_append(bytes, true, &out);
  return out;
}

}  // namespace deepinfer::tokenizer

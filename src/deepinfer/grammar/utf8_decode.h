// Decoding one UTF-8 code point of grammar source text (shared by the EBNF and regex parsers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace deepinfer::grammar {

// The code point starting at text[*pos], advancing *pos past it; nullopt (and *pos unchanged)
// for a malformed or truncated sequence.
inline std::optional<uint32_t> decode_utf8(std::string_view text, size_t* pos) {
  unsigned char c = static_cast<unsigned char>(text[*pos]);
  int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || *pos + n > text.size()) return std::nullopt;
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (int i = 1; i < n; ++i) {
    unsigned char d = static_cast<unsigned char>(text[*pos + i]);
    if ((d >> 6) != 2) return std::nullopt;
    cp = (cp << 6) | (d & 0x3F);
  }
  *pos += n;
  return cp;
}

}  // namespace deepinfer::grammar

// Decoding one UTF-8 code point of grammar source text (shared by the EBNF and regex parsers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
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

// The character at text[pos] for an error message: the whole code point, or \xHH for a byte
// that does not start a well-formed one, so a message never holds a cut UTF-8 sequence.
inline std::string char_for_message(std::string_view text, size_t pos) {
  if (pos >= text.size()) return "end of input";
  size_t p = pos;
  // Well-formed only (no overlong form, surrogate or code point past U+10FFFF), as strict
  // UTF-8 checkers such as JSON serializers demand.
  const std::optional<uint32_t> cp = decode_utf8(text, &p);
  const size_t n = p - pos;
  const uint32_t min_cp = n == 2 ? 0x80 : n == 3 ? 0x800 : n == 4 ? 0x10000 : 0;
  if (cp && *cp >= min_cp && *cp <= 0x10FFFF && (*cp < 0xD800 || *cp > 0xDFFF))
    return std::string(text.substr(pos, n));
  static const char* kHex = "0123456789ABCDEF";
  const unsigned char c = static_cast<unsigned char>(text[pos]);
  return std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
}

}  // namespace deepinfer::grammar

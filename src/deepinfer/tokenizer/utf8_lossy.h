// UTF-8 repair with the "maximal subpart" rule (one U+FFFD per bad stretch), as Rust's
// String::from_utf8_lossy does, so our decode matches HF byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::tokenizer {

// A well-formed UTF-8 sequence that starts with `lead` (RFC 3629): its length and the range its
// second byte must lie in (later bytes: 0x80-0xBF); len 0 when no sequence starts so.
struct Utf8Lead {
  int len = 0;
  uint8_t lo = 0x80, hi = 0xBF;
};
inline Utf8Lead utf8_lead(uint8_t lead) {
  Utf8Lead l;
  if (lead >= 0xC2 && lead <= 0xDF) {
    l.len = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    l.len = 3;
    if (lead == 0xE0) l.lo = 0xA0;
    if (lead == 0xED) l.hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    l.len = 4;
    if (lead == 0xF0) l.lo = 0x90;
    if (lead == 0xF4) l.hi = 0x8F;
  }
  return l;
}

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

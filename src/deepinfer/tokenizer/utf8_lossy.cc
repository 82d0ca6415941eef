#include "deepinfer/tokenizer/utf8_lossy.h"

#include <cstdint>

namespace deepinfer::tokenizer {

size_t utf8_lossy_append(std::string_view bytes, bool final, std::string* out) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t n = bytes.size(), i = 0;
  while (i < n) {
    // ASCII fast path.
    size_t j = i;
    while (j < n && p[j] < 0x80) ++j;
    if (j > i) {
      out->append(bytes.data() + i, j - i);
      i = j;
      if (i == n) break;
    }
    uint8_t c = p[i];
    int len;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      out->append(kReplacement, 3);
      ++i;
      continue;
    }
    int got = 1;
    bool bad = false;
    while (got < len) {
      if (i + got >= n) break;
      uint8_t d = p[i + got];
      bool ok = got == 1 ? (d >= lo && d <= hi) : (d >= 0x80 && d <= 0xBF);
      if (!ok) {
        bad = true;
        break;
      }
      ++got;
    }
    if (got == len) {
      out->append(bytes.data() + i, len);
      i += len;
    } else if (!bad && !final) {
      return i;  // truncated but still valid: wait for more bytes
    } else {
      out->append(kReplacement, 3);
      i += got;
    }
  }
  return n;
}

}  // namespace deepinfer::tokenizer

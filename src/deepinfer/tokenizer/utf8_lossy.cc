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
    const auto [len, lo, hi] = utf8_lead(p[i]);
    if (len == 0) {
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

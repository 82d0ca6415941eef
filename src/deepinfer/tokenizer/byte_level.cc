#include "deepinfer/tokenizer/byte_level.h"

#include <unordered_map>

namespace deepinfer::tokenizer {
namespace {

struct Tables {
  std::array<char32_t, 256> to_cp{};
  std::unordered_map<char32_t, uint8_t> from_cp;
  Tables() {
    // Printable Latin-1 bytes keep their own code point; the rest go to 256, 257, ... in order.
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = keep ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      from_cp[to_cp[b]] = static_cast<uint8_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_code_point(uint8_t b) { return tables().to_cp[b]; }

void append_utf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int decode_utf8(std::string_view s, size_t i, char32_t* cp) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t n = s.size();
  uint8_t c = p[i];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  int len;
  char32_t v;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2, v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, v = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, v = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > n) return 0;
  for (int k = 1; k < len; ++k) {
    uint8_t d = p[i + k];
    if ((d & 0xC0) != 0x80) return 0;
    v = (v << 6) | (d & 0x3F);
  }
  if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)) ||
      (v >= 0xD800 && v <= 0xDFFF))
    return 0;
  *cp = v;
  return len;
}

bool byte_level_decode(std::string_view text, std::string* out) {
  out->clear();
  const auto& from = tables().from_cp;
  for (size_t i = 0; i < text.size();) {
    char32_t cp;
    int len = decode_utf8(text, i, &cp);
    if (len == 0) return false;
    auto it = from.find(cp);
    if (it == from.end()) return false;
    out->push_back(static_cast<char>(it->second));
    i += len;
  }
  return true;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) append_utf8(byte_to_code_point(b), &out);
  return out;
}

}  // namespace deepinfer::tokenizer

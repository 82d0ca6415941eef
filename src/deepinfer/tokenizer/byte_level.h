// GPT-2 byte-level alphabet: every byte has a printable code point, so vocab strings are text.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::tokenizer {

// Code point that stands for byte b in byte-level vocab strings.
char32_t byte_to_code_point(uint8_t b);

// Maps a byte-level vocab string back to raw bytes. Returns false when a code point is not in the
// byte-level alphabet (added tokens such as "<｜User｜>"), leaving *out unspecified.
bool byte_level_decode(std::string_view text, std::string* out);

// Raw bytes -> byte-level string (UTF-8).
std::string byte_level_encode(std::string_view bytes);

// Appends the UTF-8 encoding of cp.
void append_utf8(char32_t cp, std::string* out);

// Decodes one UTF-8 scalar at s[i]; returns its length, or 0 when invalid or truncated.
int decode_utf8(std::string_view s, size_t i, char32_t* cp);

}  // namespace deepinfer::tokenizer

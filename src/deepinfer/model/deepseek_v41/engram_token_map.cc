#include "deepinfer/model/deepseek_v41/engram_token_map.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <unordered_map>

#include "deepinfer/tokenizer/byte_level.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer::v41 {
namespace {

constexpr UChar32 kSentinel = 0xE000;  // private use: keeps a lone " " through the strip
constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

bool is_collapsed_space(UChar32 c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

}  // namespace

StatusOr<std::string> engram_normalize(std::string_view text) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* nfkc = icu::Normalizer2::getNFKCInstance(err);
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(err);
  if (U_FAILURE(err)) return internal_error(std::string("ICU normalizer: ") + u_errorName(err));
  icu::UnicodeString s = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), text.size()));
  s = nfkc->normalize(s, err);
  s = nfd->normalize(s, err);
  if (U_FAILURE(err)) return internal_error(std::string("ICU normalize: ") + u_errorName(err));

  // Strip accents, lowercase one code point at a time (no final-sigma context, as Rust's
  // char::to_lowercase), collapse whitespace runs.
  icu::UnicodeString out;
  const icu::Locale& root = icu::Locale::getRoot();
  bool in_space = false;
  for (int32_t i = 0; i < s.length();) {
    const UChar32 c = s.char32At(i);
    i += U16_LENGTH(c);
    if (U_GET_GC_MASK(c) & U_GC_M_MASK) continue;
    icu::UnicodeString lower(c);
    lower.toLower(root);
    for (int32_t j = 0; j < lower.length();) {
      const UChar32 l = lower.char32At(j);
      j += U16_LENGTH(l);
      if (is_collapsed_space(l)) {
        if (!in_space) out.append(static_cast<UChar32>(' '));
        in_space = true;
      } else {
        out.append(l);
        in_space = false;
      }
    }
  }
  if (out.length() == 1 && out.charAt(0) == u' ') out.setTo(kSentinel);
  int32_t first = 0, last = out.length();
  while (first < last && u_hasBinaryProperty(out.char32At(first), UCHAR_WHITE_SPACE))
    first += U16_LENGTH(out.char32At(first));
  while (last > first) {
    const int32_t prev = out.moveIndex32(last, -1);
    if (!u_hasBinaryProperty(out.char32At(prev), UCHAR_WHITE_SPACE)) break;
    last = prev;
  }
  icu::UnicodeString stripped = out.tempSubStringBetween(first, last);
  stripped.findAndReplace(icu::UnicodeString(kSentinel), icu::UnicodeString(u' '));
  std::string utf8;
  stripped.toUTF8String(utf8);
  return utf8;
}

StatusOr<EngramTokenMap> build_engram_token_map(std::span<const EngramVocabEntry> vocab) {
  EngramTokenMap map;
  map.compressed.resize(vocab.size());
  std::unordered_map<std::string, int64_t> key_to_id;
  for (size_t id = 0; id < vocab.size(); ++id) {
    const EngramVocabEntry& entry = vocab[id];
    std::string key;
    if (entry.text.find(kReplacementChar) != std::string::npos) {
      key = entry.raw;
    } else {
      auto normalized = engram_normalize(entry.text);
      if (!normalized.ok())
        return normalized.status().with_context("engram token map, token id " + std::to_string(id));
      key = normalized->empty() ? entry.text : std::move(*normalized);
    }
    auto [it, inserted] = key_to_id.try_emplace(std::move(key), key_to_id.size());
    map.compressed[id] = it->second;
  }
  map.compressed_vocab_size = static_cast<int64_t>(key_to_id.size());
  return map;
}

StatusOr<EngramTokenMap> build_engram_token_map(const tokenizer::Tokenizer& tok) {
  std::vector<EngramVocabEntry> vocab(tok.vocab_size());
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    auto bytes = tok.token_bytes(id);
    if (!bytes.ok()) continue;  // an id with no token: HF decodes it to ""
    const int32_t ids[1] = {id};
    auto text = tok.decode(ids, /*skip_special=*/false);
    if (!text.ok()) return text.status().with_context("engram token map");
    vocab[id].text = std::move(*text);
    // tokenizer.json spells model tokens in the byte-level alphabet, added tokens as is.
    vocab[id].raw = tok.is_added(id) ? std::string(*bytes) : tokenizer::byte_level_encode(*bytes);
  }
  return build_engram_token_map(vocab);
}

}  // namespace deepinfer::v41

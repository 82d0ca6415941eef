#include "deepinfer/kv/unit_key.h"

#include <openssl/evp.h>

#include "deepinfer/base/check.h"

namespace deepinfer::kv {
namespace {

UnitKey sha256(std::string_view a, std::string_view b) {
  UnitKey k;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  DI_CHECK(ctx != nullptr);
  unsigned len = 0;
  const bool ok = EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, a.data(), a.size()) == 1 &&
                  EVP_DigestUpdate(ctx, b.data(), b.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx, k.digest.data(), &len) == 1;
  EVP_MD_CTX_free(ctx);
  DI_CHECK(ok && len == k.digest.size());
  return k;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string UnitKey::hex() const {
  static const char* kDigits = "0123456789abcdef";
  std::string s(64, '0');
  for (size_t i = 0; i < digest.size(); ++i) {
    s[2 * i] = kDigits[digest[i] >> 4];
    s[2 * i + 1] = kDigits[digest[i] & 15];
  }
  return s;
}

std::optional<UnitKey> UnitKey::from_hex(std::string_view s) {
  if (s.size() != 64) return std::nullopt;
  UnitKey k;
  for (size_t i = 0; i < k.digest.size(); ++i) {
    const int hi = hex_value(s[2 * i]), lo = hex_value(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    k.digest[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return k;
}

bool UnitKey::is_zero() const {
  for (uint8_t b : digest)
    if (b) return false;
  return true;
}

UnitKey root_key(std::string_view fingerprint) {
  return sha256("deepinfer-prefix-v1", fingerprint);
}

UnitKey next_key(const UnitKey& parent, std::span<const int32_t> tokens) {
  // Token ids as little-endian int32 (every supported host is little-endian).
  return sha256(
      std::string_view(reinterpret_cast<const char*>(parent.digest.data()), parent.digest.size()),
      std::string_view(reinterpret_cast<const char*>(tokens.data()),
                       tokens.size() * sizeof(int32_t)));
}

std::vector<UnitKey> chain_keys(const UnitKey& root, std::span<const int32_t> tokens,
                                int block_tokens, int64_t num_blocks) {
  DI_CHECK(block_tokens > 0 && num_blocks >= 0 &&
           num_blocks * block_tokens <= static_cast<int64_t>(tokens.size()));
  std::vector<UnitKey> keys;
  keys.reserve(static_cast<size_t>(num_blocks));
  UnitKey k = root;
  for (int64_t i = 0; i < num_blocks; ++i) {
    k = next_key(k, tokens.subspan(static_cast<size_t>(i * block_tokens),
                                   static_cast<size_t>(block_tokens)));
    keys.push_back(k);
  }
  return keys;
}

}  // namespace deepinfer::kv

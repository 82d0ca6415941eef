// The content address of a prefix-cache unit: SHA-256 over (parent unit's key, the block's token
// ids), with the chain rooted in a model fingerprint, so a key names one exact token prefix of
// one model, layout and numerics. SHA-256 rather than a fast hash: units are shared between
// requests (and replicas), and a crafted collision must not hand one tenant another's state.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::kv {

struct UnitKey {
  std::array<uint8_t, 32> digest{};

  std::string hex() const;                                   // 64 lowercase hex digits
  static std::optional<UnitKey> from_hex(std::string_view);  // nullopt unless 64 hex digits
  bool is_zero() const;
  auto operator<=>(const UnitKey&) const = default;
};

struct UnitKeyHash {
  size_t operator()(const UnitKey& k) const {
    size_t h;
    std::memcpy(&h, k.digest.data(), sizeof h);  // already uniformly distributed
    return h;
  }
};

// The chain's root: SHA-256 of the fingerprint (model, state layout, numerics; see the engine).
UnitKey root_key(std::string_view fingerprint);
// The key of the block `tokens` following the prefix named by `parent`.
UnitKey next_key(const UnitKey& parent, std::span<const int32_t> tokens);
// Keys of the first `num_blocks` whole blocks of `block_tokens` tokens each.
std::vector<UnitKey> chain_keys(const UnitKey& root, std::span<const int32_t> tokens,
                                int block_tokens, int64_t num_blocks);

}  // namespace deepinfer::kv

// Counter-based uniforms for deterministic sampling (seq_seed): a draw is a pure function of
// (seed, position, purpose), so it does not depend on how many draws were made before.
#pragma once

#include <cstdint>

namespace deepinfer::sample {

// What a keyed draw is for, so two uses at one position never share a uniform.
enum class DrawPurpose : uint64_t { kToken = 0, kAcceptDraft = 1, kResidual = 2 };

// SplitMix64's finalizer: a bijection with full avalanche.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) from the top 53 bits of the mixed key.
constexpr double keyed_uniform(uint64_t seed, uint64_t position,
                               DrawPurpose purpose = DrawPurpose::kToken) {
  const uint64_t key =
      mix64(seed ^ mix64(position * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(purpose) + 1));
  return static_cast<double>(key >> 11) * 0x1.0p-53;
}

}  // namespace deepinfer::sample

#include "deepinfer/model/deepseek_v41/engram_numpy_rng.h"

#include <string>

namespace deepinfer::v41 {
namespace {

// numpy/random/bit_generator.pyx (SeedSequence) constants.
constexpr uint32_t kInitA = 0x43b0d7e5u;
constexpr uint32_t kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu;
constexpr uint32_t kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu;
constexpr uint32_t kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;
constexpr int kPoolSize = 4;

uint32_t hashmix(uint32_t value, uint32_t* hash_const) {
  value ^= *hash_const;
  *hash_const *= kMultA;
  value *= *hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t result = kMixMultL * x - kMixMultR * y;
  result ^= result >> kXShift;
  return result;
}

// The integer's 32-bit words, least significant first; 0 is one zero word.
std::vector<uint32_t> entropy_words(uint64_t seed) {
  std::vector<uint32_t> words;
  if (seed == 0) words.push_back(0);
  while (seed > 0) {
    words.push_back(static_cast<uint32_t>(seed & 0xffffffffu));
    seed >>= 32;
  }
  return words;
}

std::vector<uint32_t> seed_pool(uint64_t seed) {
  const std::vector<uint32_t> entropy = entropy_words(seed);
  std::vector<uint32_t> pool(kPoolSize);
  uint32_t hash_const = kInitA;
  for (size_t i = 0; i < pool.size(); ++i)
    pool[i] = hashmix(i < entropy.size() ? entropy[i] : 0u, &hash_const);
  for (size_t src = 0; src < pool.size(); ++src)
    for (size_t dst = 0; dst < pool.size(); ++dst)
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], &hash_const));
  for (size_t src = pool.size(); src < entropy.size(); ++src)
    for (size_t dst = 0; dst < pool.size(); ++dst)
      pool[dst] = mix(pool[dst], hashmix(entropy[src], &hash_const));
  return pool;
}

constexpr unsigned __int128 kPcgMultiplier =
    (static_cast<unsigned __int128>(2549297995355413924ull) << 64) | 4865540595714422341ull;

}  // namespace

std::vector<uint64_t> numpy_seed_sequence_state(uint64_t seed, int n_words) {
  const std::vector<uint32_t> pool = seed_pool(seed);
  uint32_t hash_const = kInitB;
  std::vector<uint32_t> words(static_cast<size_t>(n_words) * 2);
  for (size_t i = 0; i < words.size(); ++i) {
    uint32_t value = pool[i % pool.size()];
    value ^= hash_const;
    hash_const *= kMultB;
    value *= hash_const;
    value ^= value >> kXShift;
    words[i] = value;
  }
  std::vector<uint64_t> out(n_words);
  for (int i = 0; i < n_words; ++i)  // little-endian pairs of 32-bit words
    out[i] = static_cast<uint64_t>(words[2 * i]) | (static_cast<uint64_t>(words[2 * i + 1]) << 32);
  return out;
}

NumpyPcg64::NumpyPcg64(uint64_t seed) {
  const std::vector<uint64_t> s = numpy_seed_sequence_state(seed, 4);
  const unsigned __int128 init_state = (static_cast<unsigned __int128>(s[0]) << 64) | s[1];
  const unsigned __int128 init_seq = (static_cast<unsigned __int128>(s[2]) << 64) | s[3];
  // pcg_setseq_128_srandom_r
  state_ = 0;
  increment_ = (init_seq << 1) | 1;
  state_ = state_ * kPcgMultiplier + increment_;
  state_ += init_state;
  state_ = state_ * kPcgMultiplier + increment_;
}

uint64_t NumpyPcg64::next_uint64() {
  state_ = state_ * kPcgMultiplier + increment_;
  const uint64_t folded = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
  const unsigned rot = static_cast<unsigned>(state_ >> 122);
  return (folded >> rot) | (folded << ((64u - rot) & 63u));
}

StatusOr<std::vector<int64_t>> numpy_integers_int64(NumpyPcg64* generator, int64_t low,
                                                    int64_t high, int64_t count) {
  if (high <= low || count < 0)
    return invalid_argument("numpy integers: need low < high and count >= 0, got [" +
                            std::to_string(low) + ", " + std::to_string(high) + ")");
  // numpy draws with the inclusive range rng = high - 1 - low.
  const uint64_t rng = static_cast<uint64_t>(high) - 1 - static_cast<uint64_t>(low);
  std::vector<int64_t> out(count);
  if (rng == 0) {
    for (auto& v : out) v = low;
    return out;
  }
  if (rng <= 0xffffffffull)
    return unimplemented("numpy integers: ranges of at most 2^32 values (numpy's 32-bit path)");
  for (auto& v : out) {
    uint64_t draw;
    if (rng == ~0ull) {
      draw = generator->next_uint64();
    } else {  // bounded_lemire_uint64
      const uint64_t rng_excl = rng + 1;
      unsigned __int128 m = static_cast<unsigned __int128>(generator->next_uint64()) * rng_excl;
      uint64_t leftover = static_cast<uint64_t>(m);
      if (leftover < rng_excl) {
        const uint64_t threshold = (~0ull - rng) % rng_excl;
        while (leftover < threshold) {
          m = static_cast<unsigned __int128>(generator->next_uint64()) * rng_excl;
          leftover = static_cast<uint64_t>(m);
        }
      }
      draw = static_cast<uint64_t>(m >> 64);
    }
    v = static_cast<int64_t>(static_cast<uint64_t>(low) + draw);
  }
  return out;
}

}  // namespace deepinfer::v41

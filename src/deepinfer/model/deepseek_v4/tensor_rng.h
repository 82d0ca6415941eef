// Per-tensor random streams for the large random models (make-tiny-model's streamed path): a
// tensor's values depend only on (seed, name, shape), never on its place in the manifest, so a
// short and a long model made from one seed share their common tensors bit for bit, and any
// number of threads can make tensors in any order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer::v4 {

// xoshiro256** seeded through splitmix64 from (seed, name, shape); a standard URBG, so
// std::shuffle can use it.
class TensorRng {
 public:
  using result_type = uint64_t;
  TensorRng(uint64_t seed, const std::string& name, const std::vector<int64_t>& shape);
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~result_type{0}; }
  result_type operator()() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Approximately standard normal: four 16-bit uniforms summed, centred and scaled to unit
  // variance (so bounded by +-2*sqrt(3)). About 1 ns a value against 16 ns for
  // std::normal_distribution, which decides how long 10^11 values take.
  float normal() {
    const uint64_t r = (*this)();
    const uint64_t sum = (r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48);
    // Each uniform has variance 1/12, so the sum of four has 1/3: scale by sqrt(3).
    return (static_cast<float>(sum) * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// The tensor's values, sized for its role as random_values() sizes them (random_tensors.h).
std::vector<float> name_seeded_values(const std::string& name, const std::vector<int64_t>& shape,
                                      TensorRng& rng);

}  // namespace deepinfer::v4

#include "deepinfer/model/deepseek_v4/tensor_rng.h"

#include "deepinfer/model/deepseek_v4/random_tensors.h"

namespace deepinfer::v4 {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

TensorRng::TensorRng(uint64_t seed, const std::string& name, const std::vector<int64_t>& shape) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a over the name: stable across builds
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001B3ull;
  uint64_t x = seed;
  uint64_t mixed = splitmix64(x) ^ h;
  for (int64_t d : shape) {
    x = mixed ^ static_cast<uint64_t>(d);
    mixed = splitmix64(x);
  }
  x = mixed;
  for (uint64_t& s : s_) s = splitmix64(x);
}

std::vector<float> name_seeded_values(const std::string& name, const std::vector<int64_t>& shape,
                                      TensorRng& rng) {
  const ValueMoments m = value_moments(name, shape);
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  std::vector<float> v(numel);
  for (float& x : v) x = m.mean + m.stddev * rng.normal();
  return v;
}

}  // namespace deepinfer::v4

// numpy's default generator (SeedSequence -> PCG64 XSL-RR 128/64) and Generator.integers for
// int64, bit for bit: the Engram hash multipliers are drawn with it (ENGRAM.md).
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::v41 {

// numpy.random.default_rng(seed)'s bit generator for a non-negative integer seed.
class NumpyPcg64 {
 public:
  explicit NumpyPcg64(uint64_t seed);
  uint64_t next_uint64();

 private:
  unsigned __int128 state_ = 0;
  unsigned __int128 increment_ = 0;
};

// SeedSequence(seed).generate_state(n_words, np.uint64).
std::vector<uint64_t> numpy_seed_sequence_state(uint64_t seed, int n_words);

// Generator.integers(low, high, size=count, dtype=np.int64) (high exclusive). Only numpy's
// 64-bit Lemire path is implemented: ranges wider than 2^32, or a single value; narrower ranges
// take numpy's buffered 32-bit path and return kUnimplemented.
StatusOr<std::vector<int64_t>> numpy_integers_int64(NumpyPcg64* generator, int64_t low,
                                                    int64_t high, int64_t count);

}  // namespace deepinfer::v41

// Reads a tests/golden/<name>/ fixture written by tools/golden/make_hf_fixtures.py.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "deepinfer/loader/dequantize.h"
#include "deepinfer/loader/safetensors_file.h"

namespace deepinfer::testing {

// DEEPINFER_SOURCE_DIR in the environment overrides the compiled-in checkout (a binary built
// here and run on the GPU machine, whose copy of the tree lies elsewhere).
inline std::string golden_dir(const std::string& name) {
  const char* env = std::getenv("DEEPINFER_SOURCE_DIR");
  return std::string(env && *env ? env : DEEPINFER_SOURCE_DIR) + "/tests/golden/" + name;
}

struct GoldenFixture {
  std::vector<int32_t> ids;
  std::vector<float> logits_full, logits_decode;  // L x vocab, transformers' two paths
  int64_t vocab = 0;
  int prefill_len = 0;
};

inline GoldenFixture load_fixture(const std::string& name) {
  GoldenFixture f;
  auto file = SafetensorsFile::open(golden_dir(name) + "/fixture.safetensors");
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  if (!file.ok()) return f;
  const TensorInfo* ids = (*file)->find("input_ids");
  const TensorInfo* full = (*file)->find("logits_full");
  const TensorInfo* dec = (*file)->find("logits_decode");
  EXPECT_TRUE(ids && full && dec);
  if (!ids || !full || !dec) return f;
  f.ids.resize(ids->numel());
  std::memcpy(f.ids.data(), ids->data, ids->nbytes);
  f.vocab = full->shape[1];
  f.logits_full.resize(full->numel());
  f.logits_decode.resize(dec->numel());
  EXPECT_TRUE(to_float(*full, f.logits_full.data()).ok());
  EXPECT_TRUE(to_float(*dec, f.logits_decode.data()).ok());
  f.prefill_len = std::stoi((*file)->metadata().at("prefill_len"));
  return f;
}

// max |a - b| / max |b| over one row.
inline double row_rel_err(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
    num = std::max(num, std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num / std::max(den, 1e-30);
}

// Ids in [2, vocab) from raw mt19937 output (fully specified, so the same on every platform).
inline std::vector<int32_t> make_ids(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(2 + rng() % static_cast<uint32_t>(vocab - 2));
  return ids;
}

}  // namespace deepinfer::testing

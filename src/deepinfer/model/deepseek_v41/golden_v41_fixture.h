// Test helper: reads a shared/golden_v41/<name>/expected.safetensors (inputs and transformers'
// logits, golden_v41/README.md) for one input row.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "deepinfer/loader/dequantize.h"
#include "deepinfer/loader/safetensors_file.h"

namespace deepinfer::v41::testing {

inline std::string fixture_dir(const std::string& name) {
  return std::string(DEEPINFER_SHARED_DIR) + "/golden_v41/" + name;
}

inline const char* const kFixtures[] = {"v41_single_src_alltopk", "v41_single_src_selective",
                                        "v41_multi_src_alltopk", "v41_multi_src_selective",
                                        "v41_engram_ratio1"};

struct GoldenRow {
  std::vector<int32_t> ids;
  // T x vocab each: use_cache=False, prefill 41 then one token per call, one cached forward.
  std::vector<float> full, incremental, cached_full;
  int64_t vocab = 0;
};

inline std::vector<float> read_f32(const SafetensorsFile& file, const std::string& name,
                                   int64_t* cols) {
  const TensorInfo* t = file.find(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return {};
  std::vector<float> v(t->numel());
  EXPECT_TRUE(to_float(*t, v.data()).ok()) << name;
  *cols = t->shape.back();
  return v;
}

inline GoldenRow load_row(const std::string& name, int row) {
  GoldenRow g;
  auto file = SafetensorsFile::open(fixture_dir(name) + "/expected.safetensors");
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  if (!file.ok()) return g;
  const TensorInfo* ids = (*file)->find("input_ids");
  EXPECT_TRUE(ids && ids->dtype == DType::kI64 && ids->shape.size() == 2);
  if (!ids) return g;
  const int64_t T = ids->shape[1];
  const auto* all = reinterpret_cast<const int64_t*>(ids->data);
  for (int64_t t = 0; t < T; ++t) g.ids.push_back(static_cast<int32_t>(all[row * T + t]));
  const std::string b = std::to_string(row);
  g.full = read_f32(**file, "full_logits_" + b, &g.vocab);
  g.incremental = read_f32(**file, "incremental_logits_" + b, &g.vocab);
  g.cached_full = read_f32(**file, "cached_full_logits_" + b, &g.vocab);
  return g;
}

// max |a - b| over one position's n logits (NaN anywhere: infinite).
inline double max_abs_diff(const float* a, const float* b, int64_t n) {
  double d = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
    d = std::max(d, std::fabs(double(a[i]) - b[i]));
  }
  return d;
}

// The logit scale of an input row as golden_v41/README.md defines it: max |full_logits_b| over
// all positions and the vocabulary.
inline double logit_scale(const GoldenRow& g) {
  double s = 0;
  for (float v : g.full) s = std::max(s, std::fabs(double(v)));
  return s;
}

}  // namespace deepinfer::v41::testing

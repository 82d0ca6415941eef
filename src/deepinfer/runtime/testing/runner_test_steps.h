// Shared by the runner tests (both model families, either device): random prompt ids, a step's
// logits rows, and a sequence run in chunks with its pages reserved as the engine reserves them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/runtime/model_runner.h"

namespace deepinfer::runtime::testing {

inline std::vector<int32_t> random_ids(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(2 + rng() % 1000);
  return ids;
}

// The default runner (the CPU's, without a device given) on `dir`, with a 128 MiB pool.
inline std::unique_ptr<ModelRunner> small_pool_runner(const std::string& dir) {
  RunnerOptions o;
  o.model_dir = dir;
  o.kv_memory_bytes = int64_t{128} << 20;
  auto r = create_runner(o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

inline std::vector<float> logits_of(const ModelRunner& r, const StepOutput& out) {
  return std::vector<float>(out.logits, out.logits + out.num_logit_rows * r.info().vocab_size);
}

// Runs `ids` for seq from position `from` in chunks of `chunk`; the last chunk's logits.
inline std::vector<float> run_chunked(ModelRunner& r, kv::KvManager& kv, uint64_t seq,
                                      const std::vector<int32_t>& ids, int64_t from,
                                      int64_t chunk) {
  StepOutput out;
  for (int64_t pos = from; pos < static_cast<int64_t>(ids.size()); pos += chunk) {
    const int64_t n = std::min<int64_t>(chunk, ids.size() - pos);
    EXPECT_TRUE(kv.reserve(seq, pos + n));
    StepBatch b;
    b.rows.push_back({seq, pos, &ids[pos], n, kv.state_pages(seq), kv.block_table(seq),
                      pos + n == static_cast<int64_t>(ids.size())});
    Status st = r.execute(b, &out);
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  return logits_of(r, out);
}

}  // namespace deepinfer::runtime::testing

// A sequence's state pages as the KV pool hands them out: the engine's arena holds every pool
// page, and the page ids come from the sequence's KvManager tables at the time of each lookup
// (the scheduler reserves pages before the forward writes them).
#pragma once

#include <cstdint>

#include "deepinfer/base/check.h"
#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/model/deepseek_v4/state_pages.h"

namespace deepinfer {

class PooledStatePages final : public v4::StatePages {
 public:
  PooledStatePages(const kv::KvManager& kv, uint64_t seq_id, float* arena, int64_t page_floats)
      : kv_(kv), seq_id_(seq_id), arena_(arena), page_floats_(page_floats) {}

  float* constant_page(int64_t k) override { return page(kv_.state_pages(seq_id_), k); }
  float* token_page(int64_t p) override { return page(kv_.block_table(seq_id_), p); }

 private:
  float* page(const std::vector<int32_t>* ids, int64_t i) const {
    DI_CHECK(ids != nullptr && i >= 0 && i < static_cast<int64_t>(ids->size()));
    return arena_ + int64_t{(*ids)[i]} * page_floats_;
  }

  const kv::KvManager& kv_;
  uint64_t seq_id_;
  float* arena_;
  int64_t page_floats_;
};

}  // namespace deepinfer

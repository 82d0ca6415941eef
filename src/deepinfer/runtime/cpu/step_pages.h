// A sequence's state pages as one step's row names them: page ids come from the row's
// state_pages and block_table (the KvManager's tables, which grow between steps), addresses from
// the runner's host arena.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/base/check.h"
#include "deepinfer/model/deepseek_v4/state_pages.h"

namespace deepinfer::runtime::cpu {

class StepPages final : public v4::StatePages {
 public:
  StepPages(float* arena, int64_t page_floats) : arena_(arena), page_floats_(page_floats) {}

  // Called before every forward of the sequence: the tables are only valid during a step.
  void bind(const std::vector<int32_t>* state, const std::vector<int32_t>* table) {
    state_ = state;
    table_ = table;
  }
  float* constant_page(int64_t k) override { return page(state_, k); }
  float* token_page(int64_t p) override { return page(table_, p); }

 private:
  float* page(const std::vector<int32_t>* ids, int64_t i) const {
    DI_CHECK(ids != nullptr && i >= 0 && i < static_cast<int64_t>(ids->size()));
    return arena_ + int64_t{(*ids)[i]} * page_floats_;
  }

  float* arena_;
  int64_t page_floats_;
  const std::vector<int32_t>* state_ = nullptr;
  const std::vector<int32_t>* table_ = nullptr;
};

}  // namespace deepinfer::runtime::cpu

#include "deepinfer/kv/block_pool.h"

#include <limits>

#include "deepinfer/base/check.h"

namespace deepinfer::kv {

BlockPool::BlockPool(int64_t num_pages) {
  DI_CHECK(num_pages >= 0 && num_pages <= std::numeric_limits<int32_t>::max());
  refcount_.assign(static_cast<size_t>(num_pages), 0);
  free_.reserve(static_cast<size_t>(num_pages));
  // Low ids on top of the stack: allocation order is 0, 1, 2, ... on a fresh pool.
  for (int64_t p = num_pages - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));
}

std::optional<int32_t> BlockPool::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t page = free_.back();
  free_.pop_back();
  refcount_[page] = 1;
  return page;
}

void BlockPool::retain(int32_t page) {
  DI_CHECK(page >= 0 && page < num_total() && refcount_[page] > 0);
  ++refcount_[page];
}

void BlockPool::release(int32_t page) {
  DI_CHECK(page >= 0 && page < num_total() && refcount_[page] > 0);
  if (--refcount_[page] == 0) free_.push_back(page);
}

int BlockPool::refcount(int32_t page) const {
  DI_CHECK(page >= 0 && page < num_total());
  return refcount_[page];
}

}  // namespace deepinfer::kv

// Fixed-size pages with reference counts: a page returns to the free list when its last holder
// releases it, so a later prefix cache can share pages between sequences.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace deepinfer::kv {

class BlockPool {
 public:
  // Pages are ids 0..num_pages-1; num_pages must fit in int32.
  explicit BlockPool(int64_t num_pages);

  // A free page with refcount 1, or nullopt when none is free. Never allocates memory.
  std::optional<int32_t> allocate();
  void retain(int32_t page);   // page must be in use
  void release(int32_t page);  // page must be in use; frees it at refcount 0

  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_total() const { return static_cast<int64_t>(refcount_.size()); }
  int refcount(int32_t page) const;

 private:
  std::vector<int32_t> refcount_;
  std::vector<int32_t> free_;  // stack; popped from the back
};

}  // namespace deepinfer::kv

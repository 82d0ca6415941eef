// How many state pages a GPU forward's pool gets (CudaModelOptions::memory_fraction /
// pool_bytes), measured with cudaMemGetInfo after the weights and a profile step's scratch, with
// one slot's pages still allocated. Both families.
#pragma once

#include <cstdint>

#include "deepinfer/base/status.h"

namespace deepinfer::cuda {

struct PoolSizing {
  double fraction = 0;     // of the device's total memory, other processes included
  int64_t pool_bytes = 0;  // > 0: exactly this pool (checked against the free memory)
  int64_t page_bytes = 0;
  int64_t slot_bytes = 0;    // one max_tokens sequence's pages (allocated while measuring)
  int64_t weight_bytes = 0;  // for the error message
  int64_t max_tokens = 0;
};

// Graph execs, cuBLASLt's internal buffers, expert groups larger than the profile's, the
// allocator's rounding.
inline constexpr int64_t kPoolMargin = int64_t{256} << 20;

// The pool's page count; resource_exhausted (naming the numbers) when it can't hold one slot.
StatusOr<int64_t> pool_pages(const PoolSizing& p);

}  // namespace deepinfer::cuda

// Where a compressor's entries live: in a sequence's token pages, addressed through its block
// table (the page that holds the tokens where an entry's window ends), or, for ops tests and
// scratch, one contiguous array. The page arithmetic is StateLayout::entry_place's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

struct EntryPages {
  float* pool = nullptr;  // the page pool's first float; contiguous: entry 0
  // Device [sequences, table_stride] token page ids; null: entries are contiguous at pool.
  const int32_t* tables = nullptr;
  int64_t table_stride = 0;
  int64_t page_floats = 0;
  int64_t offset = 0;  // floats from a page's start to this compressor's first entry slot
  int page_tokens = 0, ratio = 0, dim = 0;

  // Entry e of sequence `seq` (its row of the tables).
  __host__ __device__ float* entry(int64_t seq, int64_t e) const {
    if (!tables) return pool + e * dim;
    // 32-bit: positions stay below 2^31 (max_tokens is far smaller), and 64-bit division is slow.
    const int32_t ie = static_cast<int32_t>(e);
    const int32_t page = ((ie + 1) * ratio - 1) / page_tokens;
    const int32_t slot = ie - (page * page_tokens) / ratio;
    return pool + int64_t{tables[seq * table_stride + page]} * page_floats + offset +
           int64_t{slot} * dim;
  }
};

// Entries of `dim` floats one after another at p.
inline EntryPages contiguous_entries(float* p, int dim) {
  EntryPages e;
  e.pool = p;
  e.dim = dim;
  return e;
}

}  // namespace deepinfer::cuda

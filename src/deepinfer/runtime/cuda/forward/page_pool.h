// The device page pool as both GPU forwards (deepseek_v4's CudaModel, deepseek_v41's
// CudaV41Model) use it: where page `id` lies, the checks a sequence's pages must pass before a
// forward touches them, and the raw page copies and host I/O behind the runner's forks, prefix
// cache and offload tiers. Errors are Statuses naming the page and the pool.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/state_layout.h"   // v4::PageGeometry
#include "deepinfer/runtime/cuda/forward/cuda_model.h"  // PagedSequence
#include "deepinfer/runtime/cuda/forward/pinned_buffer.h"

namespace deepinfer::cuda {

struct PagePool {
  float* base = nullptr;  // page 0's first float
  int64_t page_floats = 0, num_pages = 0;
  int64_t page_tokens = 0, constant_pages = 0, max_token_pages = 0;

  float* page(int64_t id) const { return base + id * page_floats; }
  int64_t page_bytes() const { return page_floats * 4; }
};

// The pool of num_pages pages at base, laid out as `layout` (either family's StateLayout).
inline PagePool page_pool(float* base, const v4::PageGeometry& layout, int64_t num_pages,
                          int64_t max_token_pages) {
  PagePool p;
  p.base = base;
  p.page_floats = layout.page_floats();
  p.num_pages = num_pages;
  p.page_tokens = layout.page_tokens();
  p.constant_pages = layout.constant_pages();
  p.max_token_pages = max_token_pages;
  return p;
}

// out_of_range naming `what` and the pool when id is outside it.
Status check_page(const PagePool& p, int64_t id, const char* what);
// The sequence's pages exist and its block table covers its positions after n more tokens, at
// most max_tokens.
Status check_sequence(const PagePool& p, const PagedSequence& seq, int64_t n, int64_t max_tokens);
// verify_paged's checks of every sequence: count > 0, each past position 0, its ids (the
// family's check_ids(ids, n, first position)), check_sequence for its counts[b] ids, and
// skip[b] (if skip is set) in [0, counts[b]).
Status check_verify(const PagePool& p, const PagedSequence* seqs, const int32_t* ids,
                    const int64_t* counts, int64_t count, int64_t max_tokens,
                    const std::function<Status(const int32_t*, int64_t, int64_t)>& check_ids,
                    const int64_t* skip = nullptr);
// verify_paged's copy of one sequence's logits: rows [skip, count) of its `count` rows (device,
// vocab floats each) to host dst, queued on stream.
void copy_logits_out(float* dst, const float* rows, int64_t count, int64_t skip, int64_t vocab,
                     cudaStream_t stream);
// Page to page on the device (synchronizes `stream`), and pages to and from bytes in host or
// device memory of this process (page_bytes() each, page after page; CUDA IPC handoffs use the
// latter). Host bytes go through `staging` (page-locked, grown to at most 16 MiB): every page of
// a fill copied asynchronously, one wait per fill, where a pageable copy waits per page (the
// prefix cache reads a prompt's units back this way between steps).
Status copy_pages(const PagePool& p, const int32_t* from, const int32_t* to, int64_t n,
                  cudaStream_t stream);
Status read_pages(const PagePool& p, const int32_t* pages, int64_t n, void* dst,
                  PinnedBuffer<char>* staging);
Status write_pages(const PagePool& p, const int32_t* pages, int64_t n, const void* src,
                   PinnedBuffer<char>* staging);

}  // namespace deepinfer::cuda

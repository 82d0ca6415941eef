#include "deepinfer/runtime/cuda/forward/page_pool.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "deepinfer/backend/cuda/cuda_check.h"

namespace deepinfer::cuda {
namespace {

Status copy_status(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return ok_status();
  return internal_error(what + ": " + cudaGetErrorString(e));
}

}  // namespace

Status check_page(const PagePool& p, int64_t id, const char* what) {
  if (id < 0 || id >= p.num_pages)
    return out_of_range(std::string(what) + " page " + std::to_string(id) +
                        " is outside the pool of " + std::to_string(p.num_pages) + " pages");
  return ok_status();
}

Status check_sequence(const PagePool& p, const PagedSequence& seq, int64_t n, int64_t max_tokens) {
  if (seq.num_tokens < 0 || seq.num_tokens + n > max_tokens)
    return out_of_range(std::to_string(seq.num_tokens + n) +
                        " positions exceed CudaModelOptions.max_tokens (" +
                        std::to_string(max_tokens) + ")");
  const int64_t pt = p.page_tokens;
  const int64_t need = (seq.num_tokens + n + pt - 1) / pt;
  if (seq.num_token_pages < need || seq.num_token_pages > p.max_token_pages)
    return invalid_argument(
        "a block table of " + std::to_string(seq.num_token_pages) + " pages for " +
        std::to_string(seq.num_tokens + n) + " positions (pages of " + std::to_string(pt) +
        " tokens: " + std::to_string(need) + " to " + std::to_string(p.max_token_pages) + ")");
  for (int64_t k = 0; k < p.constant_pages; ++k)
    RETURN_IF_ERROR(check_page(p, seq.constant_pages[k], "constant"));
  for (int64_t k = 0; k < seq.num_token_pages; ++k)
    RETURN_IF_ERROR(check_page(p, seq.token_pages[k], "token"));
  int64_t after = seq.num_tokens;
  for (int64_t k = 0; k < seq.num_snapshots; ++k) {
    const PagedSnapshot& s = seq.snapshots[k];
    if (s.end_pos <= after || s.end_pos >= seq.num_tokens + n)
      return invalid_argument("snapshot " + std::to_string(k) + " ends at " +
                              std::to_string(s.end_pos) + ", outside (" + std::to_string(after) +
                              ", " + std::to_string(seq.num_tokens + n) + ")");
    after = s.end_pos;
    for (int64_t j = 0; j < p.constant_pages; ++j)
      RETURN_IF_ERROR(check_page(p, s.constant_pages[j], "snapshot"));
  }
  return ok_status();
}

Status check_verify(const PagePool& p, const PagedSequence* seqs, const int32_t* ids,
                    const int64_t* counts, int64_t count, int64_t max_tokens,
                    const std::function<Status(const int32_t*, int64_t, int64_t)>& check_ids,
                    const int64_t* skip) {
  if (count <= 0) return invalid_argument("verify: no sequences");
  int64_t off = 0;
  for (int64_t b = 0; b < count; ++b) {
    if (seqs[b].num_tokens < 1)
      return invalid_argument("verify: sequence " + std::to_string(b) + " has no prefilled tokens");
    if (skip && (skip[b] < 0 || skip[b] >= counts[b]))
      return invalid_argument("verify: sequence " + std::to_string(b) + " skips " +
                              std::to_string(skip[b]) + " of its " + std::to_string(counts[b]) +
                              " rows' logits; it must bring back at least one");
    RETURN_IF_ERROR(check_ids(ids + off, counts[b], seqs[b].num_tokens));
    RETURN_IF_ERROR(check_sequence(p, seqs[b], counts[b], max_tokens));
    off += counts[b];
  }
  return ok_status();
}

void copy_logits_out(float* dst, const float* rows, int64_t count, int64_t skip, int64_t vocab,
                     cudaStream_t stream) {
  DI_CUDA_CHECK(cudaMemcpyAsync(dst, rows + skip * vocab, (count - skip) * vocab * 4,
                                cudaMemcpyDeviceToHost, stream));
}

Status copy_pages(const PagePool& p, const int32_t* from, const int32_t* to, int64_t n,
                  cudaStream_t stream) {
  for (int64_t i = 0; i < n; ++i) {
    RETURN_IF_ERROR(check_page(p, from[i], "copy source"));
    RETURN_IF_ERROR(check_page(p, to[i], "copy destination"));
  }
  cudaError_t e = cudaSuccess;
  for (int64_t i = 0; i < n && e == cudaSuccess; ++i)
    if (from[i] != to[i])
      e = cudaMemcpyAsync(p.page(to[i]), p.page(from[i]), p.page_bytes(), cudaMemcpyDeviceToDevice,
                          stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  return copy_status(e, "copying pages");
}

namespace {

constexpr int64_t kStagingBytes = int64_t{16} << 20;

bool on_device(const void* ptr) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // plain host memory on older drivers: not an error to keep
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

// Pages [i0, i0 + m) of a transfer: how many one staging fill holds.
int64_t pages_per_fill(const PagePool& p) {
  return std::max<int64_t>(1, kStagingBytes / p.page_bytes());
}

}  // namespace

Status read_pages(const PagePool& p, const int32_t* pages, int64_t n, void* dst,
                  PinnedBuffer<char>* staging) {
  for (int64_t i = 0; i < n; ++i) RETURN_IF_ERROR(check_page(p, pages[i], "read"));
  // Every forward and decode call ends with its stream synchronized, so the state is final.
  char* out = static_cast<char*>(dst);
  const int64_t pb = p.page_bytes();
  cudaError_t e = cudaSuccess;
  if (n > 0 && staging != nullptr && !on_device(dst)) {
    const int64_t per = pages_per_fill(p);
    ASSIGN_OR_RETURN(char* buf, staging->reserve(size_t(std::min(per, n) * pb)));
    for (int64_t i0 = 0; i0 < n && e == cudaSuccess; i0 += per) {
      const int64_t m = std::min(per, n - i0);
      for (int64_t i = 0; i < m && e == cudaSuccess; ++i)
        e = cudaMemcpyAsync(buf + i * pb, p.page(pages[i0 + i]), pb, cudaMemcpyDeviceToHost, 0);
      if (e == cudaSuccess) e = cudaStreamSynchronize(0);
      if (e == cudaSuccess) std::memcpy(out + i0 * pb, buf, size_t(m * pb));
    }
    return copy_status(e, "reading pages");
  }
  for (int64_t i = 0; i < n && e == cudaSuccess; ++i)
    e = cudaMemcpy(out + i * pb, p.page(pages[i]), pb, cudaMemcpyDefault);
  // cudaMemcpy does not wait for a device-to-device copy, and the forward's stream does not
  // order after the legacy one: done before a forward may write these pages.
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return copy_status(e, "reading pages");
}

Status write_pages(const PagePool& p, const int32_t* pages, int64_t n, const void* src,
                   PinnedBuffer<char>* staging) {
  for (int64_t i = 0; i < n; ++i) RETURN_IF_ERROR(check_page(p, pages[i], "write"));
  const char* in = static_cast<const char*>(src);
  const int64_t pb = p.page_bytes();
  cudaError_t e = cudaSuccess;
  if (n > 0 && staging != nullptr && !on_device(src)) {
    const int64_t per = pages_per_fill(p);
    ASSIGN_OR_RETURN(char* buf, staging->reserve(size_t(std::min(per, n) * pb)));
    for (int64_t i0 = 0; i0 < n && e == cudaSuccess; i0 += per) {
      const int64_t m = std::min(per, n - i0);
      std::memcpy(buf, in + i0 * pb, size_t(m * pb));
      for (int64_t i = 0; i < m && e == cudaSuccess; ++i)
        e = cudaMemcpyAsync(p.page(pages[i0 + i]), buf + i * pb, pb, cudaMemcpyHostToDevice, 0);
      if (e == cudaSuccess) e = cudaStreamSynchronize(0);  // before the buffer is refilled
    }
  } else {
    for (int64_t i = 0; i < n && e == cudaSuccess; ++i)
      e = cudaMemcpy(p.page(pages[i]), in + i * pb, pb, cudaMemcpyDefault);
  }
  if (e == cudaSuccess) e = cudaDeviceSynchronize();  // as read_pages: before a forward reads them
  return copy_status(e, "writing pages");
}

}  // namespace deepinfer::cuda

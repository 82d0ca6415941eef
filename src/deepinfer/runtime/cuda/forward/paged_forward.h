// What the CUDA runner needs of a family's GPU forward (deepseek_v4's CudaModel,
// deepseek_v41's CudaV41Model): the page pool's geometry, prefill and batched decode over
// sequences named by their pages, and raw page I/O. Plain C++: no CUDA header needed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::cuda {

struct PagedSequence;
namespace v41f {
class CudaDspark;
}

class PagedForward {
 public:
  virtual ~PagedForward() = default;
  virtual int page_tokens() const = 0;
  virtual int64_t page_bytes() const = 0;
  virtual int64_t constant_pages() const = 0;  // per sequence
  virtual int64_t num_pages() const = 0;
  virtual int64_t max_decode_rows() const = 0;  // the most sequences one decode call takes
  virtual int64_t weight_bytes() const = 0;     // on the device
  virtual int64_t vocab_size() const = 0;
  virtual int64_t eos_token_id() const = 0;
  // Floats of one row's final streams (PagedSequence::final_streams); 0 where the family's GPU
  // forward keeps none (no drafter).
  virtual int64_t final_stream_floats() const { return 0; }

  // Whether forward_paged takes PagedSequence::snapshots (deepseek_v4's CudaModel).
  virtual bool takes_row_snapshots() const { return false; }
  // Appends ids to seq at seq.num_tokens (a fresh sequence at 0); logits (host, or null) gets
  // (all_logits ? n : 1) rows; argmax (if set, all_logits false) the last row's argmax.
  // keep_from_pos (StepRow's, YOCO compact; ignored with all_logits): positions before it may
  // skip the work that feeds no cached state (the families say which).
  virtual Status forward_paged(const PagedSequence& seq, const int32_t* ids, int64_t n,
                               bool all_logits, float* logits, int32_t* argmax = nullptr,
                               int64_t keep_from_pos = 0) = 0;
  // Appends ids[b] to seqs[b] (distinct constant pages); logits gets count rows; greedy each
  // row's argmax.
  virtual Status decode_paged(const PagedSequence* seqs, const int32_t* ids, int64_t count,
                              float* logits, std::vector<int32_t>* greedy) = 0;
  // Speculative verification: appends counts[b] ids to seqs[b] (distinct constant pages, each
  // past position 0), the ids concatenated in sequence order, in as few forwards of several
  // segments as the scratch allows; logits[b] (host, or null) gets sequence b's counts[b] rows.
  // logits null: no head at all (a rollback's replay). skip (null: none): sequence b's first
  // skip[b] rows run for their state only, and logits[b] gets its other counts[b] - skip[b] rows
  // (a verification row behind the accepted tokens it recomputes: cuda_runner.cc).
  virtual Status verify_paged(const PagedSequence* seqs, const int32_t* ids, const int64_t* counts,
                              int64_t count, float* const* logits,
                              const int64_t* skip = nullptr) = 0;
  // Drafting with the model's own drafter (deepseek_v4's CudaModel: the MTP layer); the
  // default is unimplemented, saying why.
  virtual Status mtp_draft(const PagedSequence* seqs, const int32_t* tokens,
                           const float* const* hidden, int64_t count, int64_t k, int32_t* drafts) {
    (void)seqs, (void)tokens, (void)hidden, (void)count, (void)k, (void)drafts;
    return unimplemented("this model family has no drafter on the GPU yet");
  }
  // deepseek_v41's DSpark drafter on the GPU (loaded with drafting and draft tensors), or null.
  virtual v41f::CudaDspark* dspark() { return nullptr; }
  virtual Status copy_pages(const int32_t* from, const int32_t* to, int64_t n) = 0;
  // dst / src: host or device memory of this process.
  virtual Status read_pages(const int32_t* pages, int64_t n, void* dst) = 0;
  virtual Status write_pages(const int32_t* pages, int64_t n, const void* src) = 0;
};

// verify_paged's batching: consecutive runs of sequences, each of at most max_seqs sequences and
// max_rows rows, passed to run(first sequence, sequences, first row, rows) in order.
// invalid_argument for a sequence of more than max_rows ids (nothing runs then).
inline Status for_verify_groups(
    const int64_t* counts, int64_t count, int64_t max_seqs, int64_t max_rows,
    const std::function<Status(int64_t, int64_t, int64_t, int64_t)>& run) {
  for (int64_t b = 0; b < count; ++b)
    if (counts[b] < 1 || counts[b] > max_rows)
      return invalid_argument("verify: sequence " + std::to_string(b) + " has " +
                              std::to_string(counts[b]) + " ids; a forward takes 1 to " +
                              std::to_string(max_rows));
  int64_t row = 0;
  for (int64_t b0 = 0; b0 < count;) {
    int64_t b1 = b0, rows = 0;
    while (b1 < count && b1 - b0 < max_seqs && rows + counts[b1] <= max_rows) rows += counts[b1++];
    RETURN_IF_ERROR(run(b0, b1 - b0, row, rows));
    row += rows;
    b0 = b1;
  }
  return ok_status();
}

}  // namespace deepinfer::cuda

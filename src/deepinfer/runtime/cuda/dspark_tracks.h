// The CUDA runner's DSpark state (deepseek_v41 with drafting): per sequence its drafter windows
// on the device (cuda_dspark.h), fed as the CPU runner's DsparkTrack is (decision 0012): a plain
// row's taps as it runs, a speculative row's only up to the length verification keeps (its
// rollback, or the next draft request when nothing was rolled back), a fork's from its parent, a
// sequence first seen past position 0 (adopted pages) from its start on, proposing nothing until
// a whole window past its start is absorbed. The backbone writes each row's taps into the
// sequence's buffer (PagedSequence::taps).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/base/status.h"
#include "deepinfer/runtime/cuda/forward_v41/cuda_dspark.h"

namespace deepinfer::runtime::cuda {

class DsparkTracks {
 public:
  explicit DsparkTracks(deepinfer::cuda::v41f::CudaDspark& drafter) : d_(drafter) {}

  // Where the row's rows of taps go: `rows` rows for a row starting at `first_pos` (a fused row
  // starts before its StepRow). first_constant_page names the sequence to a fork's copies.
  StatusOr<float*> taps_for(uint64_t seq, int64_t first_pos, int64_t rows,
                            int32_t first_constant_page);
  // After the row ran: a plain row's taps enter the windows; a speculative row's wait.
  Status after_row(uint64_t seq, bool speculative);
  // A rollback keeps positions before num_tokens: the speculative row's taps up to it enter.
  Status on_rollback(uint64_t seq, int64_t num_tokens);
  // A page copy from a live sequence's first constant page forks its windows to the child.
  Status on_copy(int32_t from, int32_t to);
  // Up to k drafts after `token` (sampled for the sequence's next position); none while the
  // windows are short or the sequence is unknown.
  // At most max_len positions in all.
  Status draft(uint64_t seq, int32_t token, int64_t k, int64_t max_len, std::vector<int32_t>* out);
  void release(uint64_t seq) { tracks_.erase(seq); }

 private:
  struct Track {
    deepinfer::cuda::DeviceBuffer<float> rings, taps;
    int64_t num_tokens = 0, start = 0;  // positions absorbed; those before start never were
    int64_t taps_pos = 0, taps_rows = 0, taps_capacity = 0;
    int64_t length = 0;      // the sequence's positions after its latest row or rollback
    bool unsettled = false;  // the latest row was speculative and its taps wait
    int32_t first_constant_page = -1;
  };
  Track fresh(int64_t start) const;
  Status absorb(Track& t, int64_t upto);  // the held taps' positions [t.num_tokens, upto)
  Status settle(Track& t);  // an unsettled speculative row kept whole: all its taps enter
  bool exact(const Track& t) const;

  deepinfer::cuda::v41f::CudaDspark& d_;
  std::unordered_map<uint64_t, Track> tracks_;
  std::unordered_map<int32_t, Track> forks_;  // by the child's first constant page
};

}  // namespace deepinfer::runtime::cuda

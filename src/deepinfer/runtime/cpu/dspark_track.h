// One sequence's DSpark drafter state as the CPU runner keeps it (V4.1, decision 0012). The
// drafter's windows hold committed positions only: the runner absorbs a plain row's taps as it
// runs, and a speculative row's only up to the length verification kept. A track started past
// position 0 (pages adopted from the prefix cache, a handoff, a fork whose parent's track was not
// at hand) lacks the positions before its start: it proposes nothing until a whole window after
// its start is absorbed, and from then on it proposes what a track fed from position 0 would.
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v41/dspark.h"

namespace deepinfer::runtime::cpu {

class DsparkTrack {
 public:
  // `drafter` must outlive the track.
  DsparkTrack(const v41::DsparkDrafter& drafter, int64_t start_pos);

  int64_t num_tokens() const { return state_.num_tokens; }
  // Whether every position a proposal reads was absorbed.
  bool exact() const;
  // n rows of the target's taps for positions num_tokens()... . Only the last window of them can
  // be read again, so only those are computed.
  Status absorb(const float* taps, int64_t n);
  // Up to k greedy drafts after `anchor` (the token at position num_tokens()); none while the
  // track is not exact.
  Status propose(int32_t anchor, int64_t k, std::vector<int32_t>* out) const;

 private:
  const v41::DsparkDrafter* drafter_;
  v41::DsparkState state_;
  int64_t start_ = 0;  // positions before it were never absorbed
};

}  // namespace deepinfer::runtime::cpu

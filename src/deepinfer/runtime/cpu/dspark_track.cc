#include "deepinfer/runtime/cpu/dspark_track.h"

#include <algorithm>

namespace deepinfer::runtime::cpu {

DsparkTrack::DsparkTrack(const v41::DsparkDrafter& drafter, int64_t start_pos)
    : drafter_(&drafter), state_(drafter.new_state()), start_(start_pos) {
  state_.num_tokens = start_pos;
}

bool DsparkTrack::exact() const {
  return start_ == 0 || state_.num_tokens >= start_ + drafter_->window();
}

Status DsparkTrack::absorb(const float* taps, int64_t n) {
  if (n <= 0) return ok_status();
  // A position's window row depends on its own taps and position alone: skipping the rows that
  // the last window overwrites changes nothing a proposal reads.
  const int64_t skip = std::max<int64_t>(0, n - drafter_->window());
  state_.num_tokens += skip;
  return drafter_->absorb(state_, taps + skip * drafter_->tap_width(), n - skip);
}

Status DsparkTrack::propose(int32_t anchor, int64_t k, std::vector<int32_t>* out) const {
  if (k < 1 || !exact()) return ok_status();
  v41::DsparkProposal p;
  RETURN_IF_ERROR(drafter_->propose(state_, anchor, &p));
  const size_t n = std::min(p.tokens.size(), static_cast<size_t>(k));
  out->insert(out->end(), p.tokens.begin(), p.tokens.begin() + n);
  return ok_status();
}

}  // namespace deepinfer::runtime::cpu
